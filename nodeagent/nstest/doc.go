// Package nstest (under nodeagent so cmd tests can use it) is test support for real traffic tests in network
// namespaces: it creates and deletes namespaces and veth pairs, runs code
// and child processes inside them, and provides small servers (an
// identity echo server, a transparent test proxy, a DNS resolver). It is
// imported only by tests and imports nothing else of this module.
package nstest
