package keyindex

import "fmt"

// errorf wraps fmt.Errorf so that every error of this package reads the same way.
func errorf(format string, args ...any) error { return fmt.Errorf("keyindex: "+format, args...) }
