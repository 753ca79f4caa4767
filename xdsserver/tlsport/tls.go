package tlsport

import (
	"crypto/tls"
	"encoding/pem"
	"net"
	"sync"
	"time"

	"github.com/baremesh/baremesh/core/identity"
)

// ServerCertTTL is the TLS listener's certificate lifetime; it is
// re-issued in memory once two thirds of it have passed.
const ServerCertTTL = 30 * 24 * time.Hour

// ServerTLS returns the TLS listener's configuration: a serving certificate
// issued by ca for sans (DNS names, or IP addresses), and a client
// certificate requested but not checked during the handshake, so that a
// missing or foreign one is refused by the Authenticator with a reason
// (and a caller with only a join token can connect).
func ServerTLS(ca *identity.CA, sans []string) (*tls.Config, error) {
	r := &rotator{ca: ca}
	for _, s := range sans {
		if ip := net.ParseIP(s); ip != nil {
			r.ips = append(r.ips, ip)
		} else {
			r.dns = append(r.dns, s)
		}
	}
	if _, err := r.get(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequestClientCert,
		// Full-size records from the first byte: a proxy's first
		// response is its whole config, not a web page whose first
		// bytes should render early.
		DynamicRecordSizingDisabled: true,
		GetCertificate:              func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.get() },
	}, nil
}

type rotator struct {
	ca  *identity.CA
	dns []string
	ips []net.IP

	mu    sync.Mutex
	cert  *tls.Certificate
	renew time.Time
	gen   uint64 // the CA's Generation cert was issued under
}

func (r *rotator) get() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Re-issued when the CA reloaded (a root rotation step): after
	// activate the port's certificate comes from the new root, which
	// agents trust since they renewed once after prepare.
	gen := r.ca.Generation()
	if r.cert != nil && r.gen == gen && time.Now().Before(r.renew) {
		return r.cert, nil
	}
	is, key, err := r.ca.SignServer(r.dns, r.ips, ServerCertTTL)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{PrivateKey: key, Leaf: is.Cert}
	c.Certificate = append(c.Certificate, is.Cert.Raw)
	for _, p := range is.Chain[1 : len(is.Chain)-1] { // intermediates; the root stays with the client
		c.Certificate = append(c.Certificate, pemDER(p))
	}
	life := is.Cert.NotAfter.Sub(is.Cert.NotBefore)
	r.cert, r.renew, r.gen = c, is.Cert.NotBefore.Add(life*2/3), gen
	return c, nil
}

func pemDER(p string) []byte {
	b, _ := pem.Decode([]byte(p))
	if b == nil {
		return nil
	}
	return b.Bytes
}
