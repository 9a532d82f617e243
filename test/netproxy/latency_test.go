package netproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// With a latency set, a request and its answer cost the round trip, and
// several requests on their way at once are not serialised by it.
func TestLatencyDelaysEachRoundTrip(t *testing.T) {
	p := echo(t)
	const rtt = 100 * time.Millisecond
	p.SetLatency(rtt)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	start := time.Now()
	if _, err := c.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "one\n" {
		t.Fatalf("echo: %q, %v", line, err)
	}
	if took := time.Since(start); took < rtt {
		t.Fatalf("a round trip took %v, less than the latency %v", took, rtt)
	}
	// Ten requests sent at once come back in order; they were on their
	// way together, so the last one's answer is not ten round trips late.
	start = time.Now()
	for range 10 {
		if _, err := c.Write([]byte("many\n")); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		if line, err := r.ReadString('\n'); err != nil || line != "many\n" {
			t.Fatalf("echo: %q, %v", line, err)
		}
	}
	if took := time.Since(start); took < rtt || took >= 5*rtt {
		t.Fatalf("ten requests on their way at once took %v, want one round trip (%v) give or take scheduling", took, rtt)
	}
}
