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

// SetUploadRate makes the connections the proxy serves from now on carry
// what the client sends at about bytesPerSecond, in 16 KiB steps: a large
// request body (a big object, a large CRD) takes size/bytesPerSecond to
// reach the server. Zero turns it off for new connections.
func (p *Proxy) SetUploadRate(bytesPerSecond int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.uploadRate = bytesPerSecond
}

// SetDownloadRate is SetUploadRate for what the server sends: a large
// answer (the object a create returns) reaches the client at about
// bytesPerSecond, in 16 KiB steps, while the server has long finished.
// Zero turns it off for new connections.
func (p *Proxy) SetDownloadRate(bytesPerSecond int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.downloadRate = bytesPerSecond
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

// throttled writes to w a byte at a time at rate bytes a second. It sleeps
// until the next byte is due rather than a fixed 1/rate per byte: a sleep
// takes at least the timer's resolution (about 0.7 ms on some virtual
// machines), so at 300 KB/s a sleep per byte trickled at a few KB/s. The
// time the connection was idle is no credit beyond throttleSlack: an answer
// after a pause trickles like the first.
type throttled struct {
	w    io.Writer
	rate int
	next time.Time // when the next byte may go
}

// throttleSlack is how far behind its schedule a trickle may fall (a sleep
// overshooting, a pause between answers) and catch up by sending at once.
const throttleSlack = 20 * time.Millisecond

func (t *throttled) Write(b []byte) (int, error) {
	gap := time.Second / time.Duration(t.rate)
	for i := range b {
		now := time.Now()
		switch {
		case t.next.After(now):
			time.Sleep(t.next.Sub(now))
		case now.Sub(t.next) > throttleSlack:
			t.next = now
		}
		if _, err := t.w.Write(b[i : i+1]); err != nil {
			return i, err
		}
		t.next = t.next.Add(gap)
	}
	return len(b), nil
}

// paced writes to w in chunks of at most 16 KiB, each after the time it
// takes at rate bytes a second.
type paced struct {
	w    io.Writer
	rate int
}

func (p paced) Write(b []byte) (int, error) {
	const chunk = 16 << 10
	n := 0
	for len(b) > 0 {
		c := min(len(b), chunk)
		time.Sleep(time.Duration(c) * time.Second / time.Duration(p.rate))
		w, err := p.w.Write(b[:c])
		n += w
		if err != nil {
			return n, err
		}
		b = b[c:]
	}
	return n, nil
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
