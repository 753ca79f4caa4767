package tunnel

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
)

// EnrollOwned is Enroll with the rule tagged by owner (see Owner).
func (e *Enroller) EnrollOwned(ctx context.Context, ip netip.Addr, owner string) error {
	r := enrolRule(ip, e.mark()) // "-s IP/32 -j MARK ...": the comment goes after -s, as iptables -S prints it
	return e.enroll(ctx, ip, append([]string{r[0], r[1], "-m", "comment", "--comment", owner}, r[2:]...))
}

// UnenrollContainer removes every enrolment rule of the pod sandbox
// containerID; none is not an error.
func (e *Enroller) UnenrollContainer(ctx context.Context, containerID string) error {
	_, err := e.removeWhere(ctx, func(owner string) bool {
		id, _, _ := strings.Cut(strings.TrimPrefix(owner, ownerPrefix), "@")
		return strings.HasPrefix(owner, ownerPrefix) && id == containerID
	})
	return err
}

// SweepStale removes the enrolments whose pod's network namespace no
// longer exists (pods gone without a CNI DEL) and returns their IPs.
// Rules without an owner tag are left alone.
func (e *Enroller) SweepStale(ctx context.Context) ([]netip.Addr, error) {
	return e.removeWhere(ctx, func(owner string) bool {
		_, netns, ok := strings.Cut(strings.TrimPrefix(owner, ownerPrefix), "@")
		if !strings.HasPrefix(owner, ownerPrefix) || !ok || netns == "" {
			return false
		}
		_, err := os.Stat(netns)
		return os.IsNotExist(err)
	})
}

// removeWhere deletes the rules whose owner tag matches.
func (e *Enroller) removeWhere(ctx context.Context, match func(owner string) bool) ([]netip.Addr, error) {
	var removed []netip.Addr
	err := e.locked(func() error {
		for _, v6 := range []bool{false, true} {
			if err := e.removeFamily(ctx, v6, match, &removed); err != nil {
				return err
			}
		}
		return nil
	})
	return removed, err
}

func (e *Enroller) removeFamily(ctx context.Context, v6 bool, match func(owner string) bool, removed *[]netip.Addr) error {
	out, err := e.ipt(ctx, v6, "-S", EnrolChain)
	if err != nil {
		return nil // no chain: nothing enrolled
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		owner := ""
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "--comment" {
				owner = strings.Trim(f[i+1], `"`)
			}
		}
		if len(f) < 4 || f[0] != "-A" || f[1] != EnrolChain || owner == "" || !match(owner) {
			continue
		}
		args := append([]string{"-D"}, f[1:]...)
		for i := range args {
			args[i] = strings.Trim(args[i], `"`)
		}
		if _, err := e.ipt(ctx, v6, args...); err != nil {
			return fmt.Errorf("unenrol %s: %w", owner, err)
		}
		*removed = append(*removed, parseEnrolled(line)...)
	}
	return nil
}
