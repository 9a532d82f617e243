package drill

import (
	"bufio"
	"net"
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
	p, err := newProxy(echo.Addr().String())
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
