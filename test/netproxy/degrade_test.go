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

// A fast trickle keeps its rate whatever the timer's resolution: 30 KB at
// 300 KB/s takes about 0.1 s, trickled (not at once), where a sleep per byte
// took about 20 s on a machine whose sleeps last 0.7 ms at the least; and an
// answer after a pause trickles like the first (the pause is no credit).
func TestFastRateKeepsItsRate(t *testing.T) {
	p := echo(t)
	p.SetRate(300 << 10)
	c, r := dialEcho(t, p)
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	line := make([]byte, 30<<10)
	for i := range line {
		line[i] = 'x'
	}
	line[len(line)-1] = '\n'
	for round := range 2 {
		start := time.Now()
		if _, err := c.Write(line); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil || len(got) != len(line) {
			t.Fatalf("round %d: echo of %d bytes: %d bytes, %v", round, len(line), len(got), err)
		}
		took := time.Since(start)
		if took < 80*time.Millisecond || took > 3*time.Second {
			t.Errorf("round %d: 30 KB at 300 KB/s took %v, want about 0.1 s", round, took)
		}
		time.Sleep(500 * time.Millisecond) // a pause between answers
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
