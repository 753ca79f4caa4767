package ctl

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// The columns proxy-status always shows, in istioctl's order; other types a
// proxy subscribed to follow them.
var statusTypes = []string{"cds", "lds", "eds", "rds"}

// Sync states, as istioctl proxy-status names them.
const (
	stateSynced  = "SYNCED"   // the last response was ACKed
	stateStale   = "STALE"    // sent, neither ACKed nor NACKed yet
	stateNacked  = "NACKED"   // the proxy rejected the config it holds
	stateNotSent = "NOT SENT" // subscribed, nothing sent yet
	stateIgnored = "IGNORED"  // not subscribed
	stateError   = "ERROR"    // the generator failed for this proxy
)

// syncState is one type's state and the time it entered it.
func syncState(s syncStatus) (string, time.Time) {
	switch {
	case s.LastNack != nil:
		return stateNacked, s.LastNack.At
	case s.GenError != "":
		return stateError, s.SentAt
	case s.SentVersion == "" && s.SentNonce == "":
		return stateNotSent, time.Time{}
	case s.AckedVer == s.SentVersion && !s.AckedAt.IsZero():
		return stateSynced, s.AckedAt
	}
	return stateStale, s.SentAt
}

// shortName is istioctl's NAME for a proxy ID "type~ip~name~domain": the
// name part; other IDs (proxyless gRPC may send any) stay whole.
func shortName(id string) string {
	if p := strings.Split(id, "~"); len(p) == 4 && p[2] != "" {
		return p[2]
	}
	return id
}

// ago formats a duration as istioctl does: 45s, 3m12s, 2h5m.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Hour:
		return d.Truncate(time.Second).String()
	case d < 48*time.Hour:
		return strings.TrimSuffix(d.Truncate(time.Minute).String(), "0s")
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// writeStatus is proxy-status's table: one row per connection, then one
// line per NACK or generation error with its reason.
func writeStatus(w io.Writer, ps []proxyStatusJSON, now time.Time) {
	sort.SliceStable(ps, func(i, j int) bool {
		if a, b := shortName(ps[i].ID), shortName(ps[j].ID); a != b {
			return a < b
		}
		return ps[i].Conn < ps[j].Conn
	})
	cols := append([]string(nil), statusTypes...)
	for _, p := range ps {
		for _, s := range p.Types {
			if !contains(cols, s.Type) {
				cols = append(cols, s.Type)
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprint(tw, "NAME\tTYPE")
	for _, c := range cols {
		fmt.Fprintf(tw, "\t%s", strings.ToUpper(c))
	}
	slo := hasConvergence(ps)
	if slo {
		fmt.Fprint(tw, "\tLAST\tWORST\tMISSED")
	}
	fmt.Fprint(tw, "\tCONNECTED\tPEER\n")
	var notes []string
	for _, p := range ps {
		typ := p.Type
		if p.Proxyless {
			typ = "proxyless"
		}
		fmt.Fprintf(tw, "%s\t%s", shortName(p.ID), typ)
		for _, c := range cols {
			cell := stateIgnored
			for _, s := range p.Types {
				if s.Type != c {
					continue
				}
				st, since := syncState(s)
				cell = st
				if a := ago(now, since); a != "" {
					cell += " (" + a + ")"
				}
				switch st {
				case stateNacked:
					notes = append(notes, fmt.Sprintf("%s %s NACKED %s ago (version %s): %s", shortName(p.ID), strings.ToUpper(c), ago(now, since), s.LastNack.Version, s.LastNack.Message))
				case stateError:
					notes = append(notes, fmt.Sprintf("%s %s generation failed: %s", shortName(p.ID), strings.ToUpper(c), s.GenError))
				}
			}
			fmt.Fprintf(tw, "\t%s", cell)
		}
		if slo {
			fmt.Fprint(tw, convergenceCells(p.Convergence))
		}
		fmt.Fprintf(tw, "\t%s\t%s\n", ago(now, p.Connected), p.Peer)
	}
	_ = tw.Flush()
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
}

// writeStatusDetail is proxy-status PROXY: every field of every type of
// the proxy's connections.
func writeStatusDetail(w io.Writer, ps []proxyStatusJSON, now time.Time) {
	for i, p := range ps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "Proxy:      %s\nConnection: %s from %s, %s ago\nType:       %s (proxyless: %v)\nNamespace:  %s\nIPs:        %s\n",
			p.ID, p.Conn, p.Peer, ago(now, p.Connected), p.Type, p.Proxyless, p.Namespace, strings.Join(p.IPs, ", "))
		if p.Identity != "" {
			fmt.Fprintf(w, "Identity:   %s\n", p.Identity)
		}
		if cv := p.Convergence; cv != nil {
			fmt.Fprintf(w, "Convergence: last %s, worst %s (objective %s); %d changes ACKed, %d over the objective, %d pending\n",
				dash(cv.Last), dash(cv.Worst), dash(cv.Objective), cv.Converged, cv.Missed, cv.Pending)
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
		fmt.Fprintln(tw, "TYPE\tSTATE\tSINCE\tNAMES\tRESOURCES\tSENT\tACKED\tREQ/ACK/NACK")
		for _, s := range p.Types {
			st, since := syncState(s)
			names := fmt.Sprint(s.Names)
			if s.Wildcard {
				names = "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d/%d/%d\n", strings.ToUpper(s.Type), st, ago(now, since), names, s.Resources,
				dash(s.SentVersion), dash(s.AckedVer), s.Requests, s.Acks, s.Nacks)
		}
		_ = tw.Flush()
		for _, s := range p.Types {
			if s.LastNack != nil {
				fmt.Fprintf(w, "%s NACK of version %s, %s ago: %s\n", strings.ToUpper(s.Type), s.LastNack.Version, ago(now, s.LastNack.At), s.LastNack.Message)
			}
			if s.GenError != "" {
				fmt.Fprintf(w, "%s generation error: %s\n", strings.ToUpper(s.Type), s.GenError)
			}
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func proxyStatus(e *Env, args []string) int {
	fs := e.newFlags("proxy-status")
	pos, err := parse(fs, args)
	if err != nil {
		return exitParse(err)
	}
	if len(pos) > 1 {
		fs.Usage()
		return 2
	}
	var ps []proxyStatusJSON
	if _, err := e.get("/debug/syncz", nil, &ps); err != nil {
		return e.fail(err)
	}
	printableStatus(ps)
	if len(pos) == 0 {
		writeStatus(e.Stdout, ps, e.Now())
		return 0
	}
	sel := matchProxy(ps, pos[0])
	if len(sel) == 0 {
		return e.fail(fmt.Errorf("no connected proxy %q (the proxies: %s)", pos[0], strings.Join(proxyNames(ps), ", ")))
	}
	writeStatusDetail(e.Stdout, sel, e.Now())
	return 0
}

// matchProxy selects the connections of a proxy given by its ID, its
// connection ID or its short name.
func matchProxy(ps []proxyStatusJSON, name string) []proxyStatusJSON {
	var out []proxyStatusJSON
	for _, p := range ps {
		if p.ID == name || p.Conn == name || shortName(p.ID) == name {
			out = append(out, p)
		}
	}
	return out
}

func proxyNames(ps []proxyStatusJSON) []string {
	var out []string
	for _, p := range ps {
		if n := shortName(p.ID); !contains(out, n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return []string{"none connected"}
	}
	return out
}

// hasConvergence reports whether the daemon sent convergence records
// (older daemons do not; their table keeps its columns).
func hasConvergence(ps []proxyStatusJSON) bool {
	for _, p := range ps {
		if p.Convergence != nil {
			return true
		}
	}
	return false
}

// convergenceCells are the LAST, WORST and MISSED cells: the last and
// worst change→ACK times, and how many changes missed the objective of
// how many ACKed ("-" before the first).
func convergenceCells(cv *convergenceJSON) string {
	if cv == nil {
		return "\t-\t-\t-"
	}
	last := dash(cv.Last)
	if cv.Pending > 0 {
		last += fmt.Sprintf(" (+%d pending)", cv.Pending)
	}
	return fmt.Sprintf("\t%s\t%s\t%d/%d", last, dash(cv.Worst), cv.Missed, cv.Converged)
}
