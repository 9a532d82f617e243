package netproxy

import (
	"io"
	"time"
)

// SetRate makes the connections the proxy serves from now on answer at
// bytesPerSecond: what the server sends trickles to the client a byte at a
// time, as from a remote cluster behind a saturated or broken link that still
// accepts connections and requests. Zero turns it off for new connections.
func (p *Proxy) SetRate(bytesPerSecond int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = bytesPerSecond
}

// SetHangAfter makes every connection the proxy serves from now on go
// silent d after it was opened: from then on nothing the server sends
// reaches the client, while the connection stays open. A client's first
// requests (a list, the start of a watch) are answered, then its watches
// and everything else on the connection hang. Zero turns it off for new
// connections.
func (p *Proxy) SetHangAfter(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hangAfter = d
}

// throttled writes to w a byte at a time at rate bytes a second.
type throttled struct {
	w    io.Writer
	rate int
}

func (t throttled) Write(b []byte) (int, error) {
	for i := range b {
		time.Sleep(time.Second / time.Duration(t.rate))
		if _, err := t.w.Write(b[i : i+1]); err != nil {
			return i, err
		}
	}
	return len(b), nil
}

// silenced forwards to w until at, and swallows everything after.
type silenced struct {
	w  io.Writer
	at time.Time
}

func (s silenced) Write(b []byte) (int, error) {
	if time.Now().After(s.at) {
		return len(b), nil
	}
	return s.w.Write(b)
}
