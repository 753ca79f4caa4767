//go:build linux

package daemon

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseStartupPages asks the kernel to reclaim the pages of this
// process's executable (its code and read-only data: MADV_PAGEOUT, Linux
// 5.4 and later). It returns how many bytes of mappings it covered.
func releaseStartupPages() (covered int64, err error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[5] != exe || strings.ContainsRune(fs[1], 'w') {
			continue // not the executable's, or written to (its data: anonymous once touched)
		}
		from, to, _ := strings.Cut(fs[0], "-")
		start, err1 := strconv.ParseUint(from, 16, 64)
		end, err2 := strconv.ParseUint(to, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return covered, fmt.Errorf("/proc/self/maps: unexpected line %q", sc.Text())
		}
		// The raw call: the range is the kernel's mapping, not Go memory.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT); errno != 0 {
			return covered, fmt.Errorf("madvise(MADV_PAGEOUT) of %s: %w", fs[0], errno)
		}
		covered += int64(end - start)
	}
	if err := sc.Err(); err != nil {
		return covered, err
	}
	if covered == 0 {
		return 0, fmt.Errorf("no read-only mapping of %s in /proc/self/maps", exe)
	}
	return covered, nil
}
