package cli

import (
	"context"
	"fmt"
)

func runDemo(ctx context.Context, env *Env) error {
	return fmt.Errorf("demo: not built yet")
}
