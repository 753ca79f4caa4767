package parity

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Result is one proxy in one scenario.
type Result struct {
	Scenario, Proxy, Kind string
	// Resources per type on each side.
	IstiodCount, OursCount map[string]int
	// Encoded bytes per type on each side.
	IstiodBytes, OursBytes map[string]int
	// Compared is the union of resource names; Equal those without a
	// difference.
	Compared, Equal int
	// Differences by class; each difference names its entry (if any).
	Deliberate, Open, Unexplained []Classified
}

// Classified is a difference and the catalog entry explaining it.
type Classified struct {
	Difference
	Entry *Entry
}

// Classify sorts diffs into r by the catalog.
func (r *Result) Classify(c *Catalog, diffs []Difference) {
	for _, d := range diffs {
		class, e := c.Classify(r.Scenario, r.Kind, d)
		cd := Classified{d, e}
		switch class {
		case Deliberate:
			r.Deliberate = append(r.Deliberate, cd)
		case Open:
			r.Open = append(r.Open, cd)
		default:
			r.Unexplained = append(r.Unexplained, cd)
		}
	}
}

// Report is a whole run.
type Report struct {
	Results  []*Result
	Duration time.Duration
	// Skipped scenarios and why.
	Skipped []string
	// UnknownTypes are Any type URLs shown without their body.
	UnknownTypes []string
}

// Totals sums the results.
func (rep *Report) Totals() (compared, equal, deliberate, open, unexplained int) {
	for _, r := range rep.Results {
		compared += r.Compared
		equal += r.Equal
		deliberate += len(r.Deliberate)
		open += len(r.Open)
		unexplained += len(r.Unexplained)
	}
	return
}

// Summary is the one-line figure for test logs.
func (rep *Report) Summary() string {
	c, e, d, o, u := rep.Totals()
	return fmt.Sprintf("parity: %d scenario×proxy runs, %d resources compared, %d equal; differences: %d in the catalog (deliberate), %d open (bugs), %d unexplained; %v",
		len(rep.Results), c, e, d, o, u, rep.Duration.Round(time.Millisecond))
}

// Write prints the full report: the table of scenarios × proxies, the
// counts per catalog entry, and every open and unexplained difference
// (at most limit of each per result; 0: all).
func (rep *Report) Write(w io.Writer, limit int) {
	fmt.Fprintln(w, rep.Summary())
	fmt.Fprintf(w, "\n%-28s %-16s %22s %22s %8s %6s %6s %5s %5s %12s %12s\n", "scenario", "proxy", "istiod L/R/C/E", "ours L/R/C/E", "compared", "equal", "delib", "open", "unexp", "LDS B istiod", "LDS B ours")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%-28s %-16s %22s %22s %8d %6d %6d %5d %5d %12d %12d\n", r.Scenario, r.Proxy, counts(r.IstiodCount), counts(r.OursCount),
			r.Compared, r.Equal, len(r.Deliberate), len(r.Open), len(r.Unexplained), r.IstiodBytes[LDS], r.OursBytes[LDS])
	}
	hits := map[string]int{}
	for _, r := range rep.Results {
		for _, l := range [][]Classified{r.Deliberate, r.Open} {
			for _, d := range l {
				hits[d.Entry.ID]++
			}
		}
	}
	ids := make([]string, 0, len(hits))
	for id := range hits {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	fmt.Fprintln(w, "\ndifferences per catalog entry:")
	for _, id := range ids {
		fmt.Fprintf(w, "  %-48s %6d\n", id, hits[id])
	}
	for _, r := range rep.Results {
		for _, sec := range []struct {
			title string
			l     []Classified
		}{{"open", r.Open}, {"UNEXPLAINED", r.Unexplained}} {
			if len(sec.l) == 0 {
				continue
			}
			fmt.Fprintf(w, "\n%s / %s: %d %s\n", r.Scenario, r.Proxy, len(sec.l), sec.title)
			for i, d := range sec.l {
				if limit > 0 && i == limit {
					fmt.Fprintf(w, "  … %d more\n", len(sec.l)-limit)
					break
				}
				id := ""
				if d.Entry != nil {
					id = " [" + d.Entry.ID + "]"
				}
				fmt.Fprintf(w, "  %s%s\n", d.Difference, id)
			}
		}
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintf(w, "\nskipped: %s\n", strings.Join(rep.Skipped, "; "))
	}
	if len(rep.UnknownTypes) > 0 {
		fmt.Fprintf(w, "\nAny types compared by @type only (not in go-control-plane): %s\n", strings.Join(rep.UnknownTypes, ", "))
	}
}

func counts(m map[string]int) string {
	return fmt.Sprintf("%d/%d/%d/%d", m[LDS], m[RDS], m[CDS], m[EDS])
}
