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
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = echo.Close() }()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					_, _ = c.Write(append(sc.Bytes(), '\n'))
				}
			}()
		}
	}()
	p, err := New(echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
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

// HoldExisting holds the connections open at the time; a new connection
// flows, and the held bytes arrive after Heal.
func TestProxyHoldExisting(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = echo.Close() }()
	got := make(chan string, 4)
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					got <- sc.Text()
				}
			}()
		}
	}()
	p, err := New(echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	old, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = old.Close() }()
	if _, err := old.Write([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "before" {
		t.Fatalf("got %q", s)
	}
	p.HoldExisting()
	if _, err := old.Write([]byte("late\n")); err != nil {
		t.Fatal(err)
	}
	fresh, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fresh.Close() }()
	if _, err := fresh.Write([]byte("fresh\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "fresh" {
			t.Fatalf("%q passed first; want the new connection's line", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a new connection did not flow")
	}
	select {
	case s := <-got:
		t.Fatalf("%q passed a held connection", s)
	case <-time.After(300 * time.Millisecond):
	}
	p.Heal()
	select {
	case s := <-got:
		if s != "late" {
			t.Fatalf("after heal got %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held bytes not delivered after heal")
	}
}

// HoldAtWrite lets small chunks through and holds, from the first large
// one on, the connections that were open when it was armed.
func TestProxyHoldAtWrite(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = echo.Close() }()
	got := make(chan string, 4)
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
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("open\n")); err != nil {
		t.Fatal(err)
	}
	<-got
	triggered := p.HoldAtWrite(100)
	if _, err := c.Write([]byte("small\n")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "small" {
		t.Fatalf("got %q", s)
	}
	large := strings.Repeat("x", 200)
	if _, err := c.Write([]byte(large + "\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-triggered:
	case <-time.After(5 * time.Second):
		t.Fatal("a large chunk did not trigger the hold")
	}
	select {
	case s := <-got:
		t.Fatalf("%d bytes passed: the triggering chunk must be held", len(s))
	case <-time.After(300 * time.Millisecond):
	}
	p.Heal()
	select {
	case s := <-got:
		if s != large {
			t.Fatalf("after heal got %d bytes", len(s))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held chunk not delivered after heal")
	}
}
