package netproxy

import (
	"io"
	"time"
)

// SetLatency makes the connections the proxy serves from now on deliver
// every chunk half of rtt late in each direction, so each request and its
// answer cost rtt more, as a remote cluster across a WAN would (a loopback
// round trip costs microseconds). Chunks keep their order and are not
// rate limited: many requests may be on their way at once, as on a real
// link. Zero turns it off for new connections.
func (p *Proxy) SetLatency(rtt time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = rtt
}

// delayed is an io.Writer that delivers each write to w after delay,
// returning at once: the bytes are on their way.
type delayed struct {
	w     io.Writer
	delay time.Duration
	ch    chan chunk
	done  chan struct{}
}

type chunk struct {
	b  []byte
	at time.Time
}

func newDelayed(w io.Writer, delay time.Duration) *delayed {
	d := &delayed{w: w, delay: delay, ch: make(chan chunk, 1024), done: make(chan struct{})}
	go d.deliver()
	return d
}

func (d *delayed) Write(b []byte) (int, error) {
	d.ch <- chunk{b: append([]byte(nil), b...), at: time.Now().Add(d.delay)}
	return len(b), nil
}

// deliver writes the chunks in order, each once its time has come; after a
// failed write the rest is dropped (the connection is gone).
func (d *delayed) deliver() {
	defer close(d.done)
	var failed bool
	for c := range d.ch {
		if failed {
			continue
		}
		time.Sleep(time.Until(c.at))
		_, err := d.w.Write(c.b)
		failed = err != nil
	}
}

// Close delivers what is still on its way and returns.
func (d *delayed) Close() error {
	close(d.ch)
	<-d.done
	return nil
}
