package cni

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
)

func errorAs(err error, target any) bool { return errors.As(err, target) }

// runPlugin execs the plugin with CNI environment and stdin, returning
// stdout.
func runPlugin(bin, command, stdin string) (string, error) {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CNI_COMMAND="+command, "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/self/ns/net",
		"CNI_IFNAME=eth0", "CNI_PATH=/nonexistent")
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	return out.String(), err
}
