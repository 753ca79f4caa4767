package ctl

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"time"
)

// secretTable is proxy-config secret, as istioctl's: the SDS secrets
// baremeshd sent the proxy (gateway credentials; a workload's own
// certificate and root come from its agent), each certificate's serial
// and validity. Private keys never leave the daemon's debug API
// (config_dump redacts them).
func secretTable(w io.Writer, res []map[string]any, _ configFilter) {
	tw := newTable(w, "RESOURCE NAME", "TYPE", "STATUS", "VALID CERT", "SERIAL NUMBER", "NOT AFTER", "NOT BEFORE")
	now := time.Now()
	for _, r := range res {
		typ, data := "Cert Chain", str(r, "tlsCertificate", "certificateChain", "inlineBytes")
		if data == "" {
			typ, data = "CA", str(r, "validationContext", "trustedCa", "inlineBytes")
		}
		c, err := firstCert(data)
		if err != nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", str(r, "name"), typ, "ACTIVE", "false", "-", "-", "- ("+err.Error()+")")
			continue
		}
		valid := !now.Before(c.NotBefore) && now.Before(c.NotAfter)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%x\t%s\t%s\n", str(r, "name"), typ, "ACTIVE", valid, c.SerialNumber,
			c.NotAfter.UTC().Format(time.RFC3339), c.NotBefore.UTC().Format(time.RFC3339))
	}
	_ = tw.Flush()
}

// firstCert decodes the first PEM certificate of a DataSource's
// inline_bytes as protojson writes them (base64).
func firstCert(b64 string) (*x509.Certificate, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	blk, _ := pem.Decode(raw)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("no PEM certificate")
	}
	return x509.ParseCertificate(blk.Bytes)
}

func keepSecret(map[string]any, configFilter) bool { return true }
