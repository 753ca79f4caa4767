package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/core/testkit"
)

// The overlapping faults (issue #32: "one after another and then
// overlapping"), run by TestChaos after the faults one at a time. Each
// ends with the same checks (fleet.converge), timed from the end of the
// last fault.

const saveFailures = "baremesh_registration_state_save_failures_total"

// partitionDuringKills cuts cp-c from the two others and, while it is cut,
// kills (-9) and restarts cp-a then cp-b, one after the other; then heals.
// The replicas see each other die and come back on one side only, and the
// restarted ones join a cluster missing a member.
func (f *fleet) partitionDuringKills(kills int) {
	f.t.Helper()
	rs := f.rs
	f.spread()
	f.mint(0)
	partition(f.t, rs[2], rs[:2], true)
	for k := range kills {
		v := rs[k%2]
		v.kill()
		v.start(f.t)
		v.waitReady(f.t)
	}
	// Past the grace period, so that each side writes the other's
	// entries off before the heal.
	cut := time.Now()
	testkit.EventuallyWithin(f.t, time.Minute, "cp-a to write cp-c's entries off", func() bool {
		s, err := rs[0].status()
		if err != nil {
			return false
		}
		for _, e := range s.Entries {
			if e.Owner == rs[2].name && e.Connected {
				return false
			}
		}
		return time.Since(cut) > 12*time.Second
	})
	partition(f.t, rs[2], rs[:2], false)
	f.converge(fmt.Sprintf("cp-c cut during %d kill -9 of cp-a/cp-b, heal", kills), time.Now())
}

// diskFullDuringPartition fills cp-b's state disk, then cuts cp-c away
// past the grace period (cp-a and cp-b write its entries off: cp-b must
// save and cannot), and mints a token on cp-b (refused, saying why) and
// one on cp-a (cp-b cannot write it: it must hold it once freed). Heal,
// then free.
func (f *fleet) diskFullDuringPartition() {
	f.t.Helper()
	rs := f.rs
	f.spread()
	failed0 := rs[1].metric(saveFailures)
	free := fillState(f, rs[1])
	partition(f.t, rs[2], rs[:2], true)
	failedSave(f, rs[1], failed0)
	f.mintRefused(1)
	f.mint(0)
	cut := time.Now()
	testkit.EventuallyWithin(f.t, time.Minute, "past the grace period", func() bool { return time.Since(cut) > 12*time.Second })
	partition(f.t, rs[2], rs[:2], false)
	free()
	f.converge("cp-b's disk full during cp-c cut, heal, free", time.Now())
	f.savedAll(rs[1])
}

// restartAllDiskFull kills all three at once and starts them with cp-b's
// state disk full; frees it once cp-a and cp-c are ready (cp-b either
// starts and cannot save, or waits: it must not lose its state file).
func (f *fleet) restartAllDiskFull() {
	f.t.Helper()
	rs := f.rs
	f.spread()
	f.mint(2)
	free := fillState(f, rs[1])
	var kw sync.WaitGroup
	for _, r := range rs {
		kw.Add(1)
		go func() { defer kw.Done(); r.kill() }()
	}
	kw.Wait()
	for _, r := range rs {
		r.start(f.t)
	}
	rs[0].waitReady(f.t)
	rs[2].waitReady(f.t)
	if rs[1].running() {
		rs[1].waitReady(f.t)
		failedSave(f, rs[1], 0) // a new process: its count starts at 0
		f.mintRefused(1)
	} else {
		f.t.Logf("cp-b exited on a full disk:\n%s", rs[1].tail())
	}
	free()
	if !rs[1].running() { // as systemd's Restart= would
		rs[1].start(f.t)
		rs[1].waitReady(f.t)
	}
	f.converge("kill -9 all three, start with cp-b's disk full, free", time.Now())
	f.savedAll(rs[1])
}

// fillState fills r's state tmpfs (ENOSPC) and returns what frees it.
func fillState(f *fleet, r *replica) (free func()) {
	f.t.Helper()
	fill := filepath.Join(r.state, "fill")
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+fill, "bs=1M").CombinedOutput(); err == nil || !strings.Contains(string(out), "No space left") {
		f.t.Fatalf("filling %s: %v: %s", r.state, err, out)
	}
	return func() {
		if err := os.Remove(fill); err != nil {
			f.t.Fatal(err)
		}
	}
}

// topUp takes again whatever space r's state tmpfs has regained (the
// fill file grows until ENOSPC). A state write in flight when the disk
// filled renames over the old file and frees it: with 5,000
// registrations (a 10 MB file rewritten every few hundred ms) the next
// write then fit in the old one's place, and so on, and the replica never
// failed a save (the full run stopped waiting for it).
func topUp(f *fleet, r *replica) {
	fh, err := os.OpenFile(filepath.Join(r.state, "fill"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		f.t.Fatalf("topping up %s: %v", r.state, err)
	}
	defer fh.Close()
	buf := make([]byte, 64<<10)
	for n := len(buf); n > 0; n /= 4 { // then smaller pieces, to the last block
		for {
			if _, err := fh.Write(buf[:n]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					f.t.Fatalf("topping up %s: %v", r.state, err)
				}
				break
			}
		}
	}
}

// failedSave waits until r has failed a state write since it read
// failed0, topping its full disk up meanwhile (topUp).
func failedSave(f *fleet, r *replica, failed0 float64) {
	f.t.Helper()
	testkit.EventuallyWithin(f.t, time.Minute, r.name+" to fail a state write", func() bool {
		topUp(f, r)
		return r.metric(saveFailures) > failed0
	})
	topUp(f, r)
}

// mintRefused mints a token on replica i, whose state disk is full: it
// must be refused, saying the disk is full, and leave nothing behind (a
// token that was refused must not turn up later, and no temporary file).
func (f *fleet) mintRefused(i int) {
	f.t.Helper()
	dir := filepath.Join(f.rs[i].state, "tokens")
	before, _ := (&identity.TokenStore{Dir: dir}).List()
	_, rec, err := (&identity.TokenStore{Dir: dir}).Create(identity.TokenSpec{Namespace: "default", ServiceAccount: "vm", TTL: time.Hour})
	if err == nil {
		f.t.Fatalf("token %s minted on %s with its state disk full: want an error", rec.ID, f.rs[i].name)
	}
	if !errors.Is(err, identity.ErrTokenStore) || !errors.Is(err, syscall.ENOSPC) {
		f.t.Fatalf("token on a full disk (%s): %v: want ErrTokenStore wrapping ENOSPC", f.rs[i].name, err)
	}
	f.t.Logf("token on %s's full disk refused: %v", f.rs[i].name, err)
	after, err := (&identity.TokenStore{Dir: dir}).List()
	if err != nil || len(after) != len(before) {
		f.t.Fatalf("%s's tokens after a refused mint: %d, err %v; before: %d", f.rs[i].name, len(after), err, len(before))
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(tmp) > 0 {
		f.t.Fatalf("temporary files left by a refused mint: %v", tmp)
	}
}

// savedAll waits until r's state file holds every registration again.
func (f *fleet) savedAll(r *replica) {
	f.t.Helper()
	testkit.EventuallyWithin(f.t, time.Minute, r.name+"'s state file to hold every registration again", func() bool {
		return savedRecords(r.state) == len(f.proxies)
	})
}
