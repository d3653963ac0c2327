// Command labd is the small daemon the lab packages with its own systemd
// unit and installs on its hosts through muster: it reads a config file
// once at start, tells systemd it is ready (Type=notify), and answers
// every connection to its unix socket with one line saying its PID, the
// config it read and the LABD_COLOUR its unit gave it. A missing or empty
// config makes it exit 1 before it is ready, so that systemd fails the
// start. `labd ask SOCKET` prints a running labd's answer.
//
// It is not part of muster; it exists to be managed by it.
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "labd:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 2 && args[0] == "ask" {
		c, err := net.Dial("unix", args[1])
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = io.Copy(os.Stdout, c)
		return err
	}
	if len(args) != 2 {
		return errors.New("usage: labd CONFIG SOCKET | labd ask SOCKET")
	}
	conf, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	greeting := strings.TrimSpace(string(conf))
	if greeting == "" {
		return fmt.Errorf("%s is empty", args[0])
	}
	os.Remove(args[1])
	l, err := net.Listen("unix", args[1])
	if err != nil {
		return err
	}
	if err := notify("READY=1"); err != nil {
		return err
	}
	answer := fmt.Sprintf("pid=%d config=%q colour=%q\n", os.Getpid(), greeting, os.Getenv("LABD_COLOUR"))
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		io.WriteString(c, answer)
		c.Close()
	}
}

// notify sends state to systemd's notification socket (sd_notify(3)).
func notify(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}
