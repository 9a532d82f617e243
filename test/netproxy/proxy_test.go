package netproxy

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// Bytes pass through; a cut closes the open connection and refuses new
// ones; a heal lets new ones through again.
func TestProxyCutAndHeal(t *testing.T) {
	p := echo(t)
	roundTrip := func(c net.Conn) error {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		_, err := bufio.NewReader(c).ReadString('\n')
		return err
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(c); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if err := roundTrip(c); err == nil {
		t.Fatal("an open connection survived the cut")
	}
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		if roundTrip(c2) == nil {
			t.Fatal("a new connection got through a cut proxy")
		}
		_ = c2.Close()
	}
	p.Heal()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c3.Close() }()
	if err := roundTrip(c3); err != nil {
		t.Fatalf("after heal: %v", err)
	}
}

// A hold keeps connections open but passes nothing either way, not even a
// client's close; after the heal what was held back arrives.
func TestProxyHold(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = echo.Close() }()
	got := make(chan string, 4)
	closed := make(chan struct{})
	go func() {
		c, err := echo.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			got <- sc.Text()
		}
		close(closed)
	}()
	p, err := New(echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "before" {
		t.Fatalf("got %q", s)
	}
	p.Hold()
	if _, err := c.Write([]byte("held\n")); err != nil {
		t.Fatalf("a held connection refused a write: %v", err)
	}
	_ = c.Close()
	select {
	case s := <-got:
		t.Fatalf("%q passed a held proxy", s)
	case <-closed:
		t.Fatal("the client's close passed a held proxy")
	case <-time.After(500 * time.Millisecond):
	}
	p.Heal()
	select {
	case s := <-got:
		if s != "held" {
			t.Fatalf("after heal got %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held bytes not delivered after heal")
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the client's close not delivered after heal")
	}
}

// echo starts a server that writes back every line a connection sends,
// and a proxy in front of it.
func echo(t *testing.T) *Proxy {
	t.Helper()
	return lineServer(t, func(c net.Conn, line []byte) { _, _ = c.Write(append(line, '\n')) })
}

// sink starts a server that sends every line any connection writes to it
// on the returned channel, and a proxy in front of it.
func sink(t *testing.T) (*Proxy, <-chan string) {
	t.Helper()
	got := make(chan string, 4)
	return lineServer(t, func(_ net.Conn, line []byte) { got <- string(line) }), got
}

// lineServer starts a server that calls handle with every line a
// connection sends, and a proxy in front of it.
func lineServer(t *testing.T, handle func(c net.Conn, line []byte)) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					handle(c, sc.Bytes())
				}
			}()
		}
	}()
	p, err := New(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// send dials p (or reuses c) and writes line.
func send(t *testing.T, p *Proxy, c net.Conn, line string) net.Conn {
	t.Helper()
	if c == nil {
		var err error
		if c, err = net.Dial("tcp", p.Addr()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	return c
}

// expect receives the next line, which must be want; "" expects none for
// 300 ms (held).
func expect(t *testing.T, got <-chan string, want string) {
	t.Helper()
	wait := 5 * time.Second
	if want == "" {
		wait = 300 * time.Millisecond
	}
	select {
	case s := <-got:
		if s != want {
			t.Fatalf("got %d bytes %.20q, want %.20q", len(s), s, want)
		}
	case <-time.After(wait):
		if want != "" {
			t.Fatalf("%.20q not delivered", want)
		}
	}
}

// HoldExisting holds the connections open at the time; a new connection
// flows, and the held bytes arrive after Heal.
func TestProxyHoldExisting(t *testing.T) {
	p, got := sink(t)
	old := send(t, p, nil, "before")
	expect(t, got, "before")
	p.HoldExisting()
	send(t, p, old, "late")
	send(t, p, nil, "fresh")
	expect(t, got, "fresh")
	expect(t, got, "")
	p.Heal()
	expect(t, got, "late")
}

// HoldAtWrite lets small chunks through and holds, from the first large
// one on, the connections that were open when it was armed.
func TestProxyHoldAtWrite(t *testing.T) {
	p, got := sink(t)
	c := send(t, p, nil, "open")
	expect(t, got, "open")
	triggered := p.HoldAtWrite(100)
	send(t, p, c, "small")
	expect(t, got, "small")
	large := strings.Repeat("x", 200)
	send(t, p, c, large)
	select {
	case <-triggered:
	case <-time.After(5 * time.Second):
		t.Fatal("a large chunk did not trigger the hold")
	}
	expect(t, got, "") // the triggering chunk is held too
	p.Heal()
	expect(t, got, large)
}

// A write's headers, sent just before its body, are held with it, and what
// the client sends after it, and its close, arrive TrailDelay after the
// write: the server handles a late write before its cancellation.
func TestProxyHoldAtWriteKeepsTheWriteWhole(t *testing.T) {
	p, got := sink(t)
	c := send(t, p, nil, "open")
	expect(t, got, "open")
	triggered := p.HoldAtWrite(100)
	body := strings.Repeat("b", 200)
	if _, err := c.Write([]byte("headers\n")); err != nil {
		t.Fatal(err)
	}
	send(t, p, c, body)
	select {
	case <-triggered:
	case <-time.After(5 * time.Second):
		t.Fatal("the body did not trigger the hold")
	}
	send(t, p, c, "cancel")
	_ = c.Close()
	expect(t, got, "") // the headers are held with the body
	healed := time.Now()
	p.Heal()
	expect(t, got, "headers")
	expect(t, got, body)
	expect(t, got, "cancel")
	if d := time.Since(healed); d < TrailDelay {
		t.Fatalf("what followed the write arrived %v after the heal, before TrailDelay", d)
	}
}
