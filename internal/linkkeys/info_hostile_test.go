package linkkeys

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadInfoRefusesDevicesAndLargeFiles (issue 27, finding 3): --info-file /dev/zero (or a
// symlink to it) is refused by name; so is a file above the info file cap.
func TestReadInfoRefusesDevicesAndLargeFiles(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "info.json")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"port":1,"domain":"`+strings.Repeat("a", 100<<10)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{link: "character device", big: "is larger than the 64 KiB cap on info files"} {
		_, err := ReadInfo(path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadInfo(%s) = %v; want %q", path, err, want)
		}
	}
}
