package kube

import (
	"time"

	"github.com/baremesh/baremesh/core/store"
)

// noteDir reports the kubeconfig directory missing (logged once, and a
// problem on it, which /debug/configz shows) or back: it is waited for,
// and its clusters join when it appears, but not without a word.
func (s *Source) noteDir(missing bool) {
	if missing == s.dirMissing {
		return
	}
	s.dirMissing = missing
	if !missing {
		s.log.Info("kubeconfig directory present", "dir", s.opts.Dir)
		s.sink.SetProblems(s.opts.Dir, nil)
		return
	}
	s.log.Warn("kubeconfig directory does not exist; waiting for it (its files' clusters join when it appears)", "dir", s.opts.Dir)
	s.sink.SetProblems(s.opts.Dir, []store.Problem{{Error: "kubeconfig directory does not exist yet; waiting for it", Since: time.Now()}})
}
