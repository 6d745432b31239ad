// Package linkkeysserver is the LinkKeys reference TCP/TLS server.
package linkkeysserver
