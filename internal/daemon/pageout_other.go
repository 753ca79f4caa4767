//go:build !linux

package daemon

import "errors"

// releaseStartupPages needs Linux's MADV_PAGEOUT.
func releaseStartupPages() (int64, error) { return 0, errors.ErrUnsupported }
