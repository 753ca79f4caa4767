package onboard

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"text/tabwriter"
	"time"

	"github.com/baremesh/baremesh/core/identity"
)

func tokenCreate(args []string, stdout, stderr io.Writer) int {
	fs := flags("token create", "--namespace NS --service-account SA [--group WG] [--ttl 1h] [--uses N]",
		"  baremeshctl token create --namespace bookinfo --service-account reviews --group reviews --ttl 2h --uses 1\n"+
			"  baremeshctl token --config /etc/baremesh/baremesh.yaml create --namespace bookinfo --service-account reviews\n", stderr)
	var c common
	c.register(fs)
	var spec identity.TokenSpec
	fs.StringVar(&spec.Namespace, "namespace", "", "namespace of the identity the token buys (required)")
	fs.StringVar(&spec.ServiceAccount, "service-account", "", "service account of the identity (required)")
	fs.StringVar(&spec.Group, "group", "", "WorkloadGroup the workload joins (recorded, shown on /debug/certz)")
	fs.DurationVar(&spec.TTL, "ttl", time.Hour, "how long the token can be used")
	fs.IntVar(&spec.MaxUses, "uses", 0, "how many certificates it can buy (0: any number within its ttl)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if spec.Namespace == "" || spec.ServiceAccount == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "baremeshctl token create: --namespace and --service-account are required")
		return 2
	}
	cfg, err := c.load()
	if err != nil {
		return fail(stderr, err)
	}
	tok, rec, err := (&identity.TokenStore{Dir: tokenDir(cfg)}).Create(spec)
	if err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintln(stdout, tok)
	fmt.Fprintf(stderr, "token %s for %s/%s expires %s\n", rec.ID, rec.Namespace, rec.ServiceAccount, rec.Expires.Format(time.RFC3339))
	return 0
}

func tokenList(args []string, stdout, stderr io.Writer) int {
	fs := flags("token list", "", "  baremeshctl token list --config /etc/baremesh/baremesh.yaml\n", stderr)
	var c common
	c.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "baremeshctl token list: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg, err := c.load()
	if err != nil {
		return fail(stderr, err)
	}
	// Listing reads: a state directory without a token store stays as it is.
	if _, err := os.Stat(tokenDir(cfg)); errors.Is(err, iofs.ErrNotExist) {
		fmt.Fprintf(stderr, "no tokens: %s does not exist (no token was made with this state directory)\n", tokenDir(cfg))
		return 0
	}
	recs, err := (&identity.TokenStore{Dir: tokenDir(cfg)}).List()
	if err != nil {
		return fail(stderr, err)
	}
	now := time.Now()
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAMESPACE\tSERVICE ACCOUNT\tGROUP\tEXPIRES\tUSES\tSTATE")
	for _, r := range recs {
		uses := fmt.Sprint(r.Uses)
		if r.MaxUses > 0 {
			uses += fmt.Sprintf("/%d", r.MaxUses)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Namespace, r.ServiceAccount, dash(r.Group),
			r.Expires.Local().Format(time.RFC3339), uses, r.State(now))
	}
	_ = w.Flush()
	return 0
}

func tokenRevoke(args []string, stdout, stderr io.Writer) int {
	fs := flags("token revoke", "ID", "  baremeshctl token revoke 3f9a0c1d2e4b5a69 --config /etc/baremesh/baremesh.yaml\n", stderr)
	var c common
	c.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var id string
	if fs.NArg() > 0 { // flags may also follow the ID
		id = fs.Arg(0)
		if code, ok := parseFlags(fs, fs.Args()[1:]); !ok {
			return code
		}
	}
	if id == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: baremeshctl token revoke ID")
		return 2
	}
	cfg, err := c.load()
	if err != nil {
		return fail(stderr, err)
	}
	if _, err := os.Stat(tokenDir(cfg)); errors.Is(err, iofs.ErrNotExist) {
		return fail(stderr, fmt.Errorf("join token unknown: %s (%s does not exist: is --config the file baremeshd runs with?)", id, tokenDir(cfg)))
	}
	rec, err := (&identity.TokenStore{Dir: tokenDir(cfg)}).Revoke(id)
	if err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "revoked %s (%s/%s)\n", rec.ID, rec.Namespace, rec.ServiceAccount)
	return 0
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
