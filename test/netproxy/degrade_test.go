package netproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// dialEcho opens a connection to the echo server behind p.
func dialEcho(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, bufio.NewReader(c)
}

// With a rate set, answers trickle: ten bytes at 20 bytes a second take
// about half a second, where they take microseconds otherwise.
func TestRateTrickles(t *testing.T) {
	p := echo(t)
	p.SetRate(20)
	c, r := dialEcho(t, p)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := c.Write([]byte("123456789\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "123456789\n" {
		t.Fatalf("echo: %q, %v", line, err)
	}
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Fatalf("10 bytes at 20 B/s took %v", took)
	}
}

// With a hang set, a connection answers until the hang and never after,
// while it stays open; a new connection answers again at first.
func TestHangAfterSilencesOldConnections(t *testing.T) {
	p := echo(t)
	p.SetHangAfter(300 * time.Millisecond)
	c, r := dialEcho(t, p)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("early\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "early\n" {
		t.Fatalf("before the hang: %q, %v", line, err)
	}
	time.Sleep(400 * time.Millisecond)
	if _, err := c.Write([]byte("late\n")); err != nil {
		t.Fatalf("the connection was closed: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("answered %q after the hang", line)
	}
	c2, r2 := dialEcho(t, p)
	_ = c2.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c2.Write([]byte("anew\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r2.ReadString('\n'); err != nil || line != "anew\n" {
		t.Fatalf("a new connection: %q, %v", line, err)
	}
}
