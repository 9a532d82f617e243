// Package netproxy is a loopback TCP proxy that stages network faults
// between a client and an API server: a partition that closes connections
// (Cut), and a black hole that keeps them open but stops forwarding (Hold),
// for every connection or for those open at the time (HoldExisting); and
// degraded links: added latency (SetLatency), a trickle (SetRate), and
// connections that go silent after their first answers (SetHangAfter).
package netproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Proxy forwards TCP connections from its loopback address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	held  chan struct{} // closed while bytes flow; open while held
	conns map[net.Conn]struct{}
	// gen numbers the connections served; those up to oldGen wait on
	// oldHeld (HoldExisting).
	gen, oldGen uint64
	oldHeld     chan struct{}
	flowing     chan struct{} // always closed
	// armed, when above zero, is the size of the client's chunk that
	// triggers HoldExisting (HoldAtWrite); triggered is closed then.
	armed     int
	armedGen  uint64 // only connections open when armed trigger it
	triggered chan struct{}
	// trail holds what the client of the triggering connection sent after
	// the write, until TrailDelay after Heal.
	trail chan struct{}
	// latency is the round trip added to connections served (SetLatency).
	latency time.Duration
	// rate is the bytes a second the server's answers trickle at (SetRate).
	rate int
	// uploadRate and downloadRate are the bytes a second client requests
	// and server answers go at (SetUploadRate, SetDownloadRate).
	uploadRate, downloadRate int
	// hangAfter is how long after its start a connection goes silent
	// (SetHangAfter).
	hangAfter time.Duration
	wg        sync.WaitGroup
}

// TrailDelay is how long after Heal the bytes that followed the write that
// triggered HoldAtWrite (on its connection) arrive: a client that gave up
// on the held write cancels it, and that cancellation must not overtake
// the write, so the server handles the write first, as it would a request
// whose packets were retransmitted before the rest.
const TrailDelay = time.Second

// lookAheadWindow is how long, on a connection HoldAtWrite watches, a
// small chunk waits for the next one: an HTTP/2 client flushes a request's
// headers before it writes its body, and a write's headers must be held
// with its body, or the server starts the request before the heal.
const lookAheadWindow = 20 * time.Millisecond

// link is what the two directions of one proxied connection share.
type link struct {
	// trail, once the connection triggered HoldAtWrite, gates what its
	// client sends after the triggering write, and its close.
	trail chan struct{}
}

// New listens on a free loopback port and forwards to target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	flowing := make(chan struct{})
	close(flowing)
	p := &Proxy{ln: ln, target: target, held: flowing, oldHeld: flowing, flowing: flowing, trail: flowing, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(in) {
			_ = in.Close()
			continue
		}
		p.wg.Go(func() { p.serve(in) })
	}
}

// track registers c unless the proxy is cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) serve(in net.Conn) {
	defer p.untrack(in)
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(out) {
		_ = out.Close()
		return
	}
	defer p.untrack(out)
	p.mu.Lock()
	p.gen++
	gen, latency, rate, hangAfter, uploadRate, downloadRate := p.gen, p.latency, p.rate, p.hangAfter, p.uploadRate, p.downloadRate
	p.mu.Unlock()
	opened := time.Now()
	l := &link{}
	done := make(chan struct{}, 2)
	pipe := func(dst io.Writer, src *gatedReader) {
		if !src.fromClient && hangAfter > 0 {
			dst = silenced{w: dst, at: opened.Add(hangAfter)}
		}
		if !src.fromClient && rate > 0 {
			dst = &throttled{w: dst, rate: rate}
		}
		if src.fromClient && uploadRate > 0 {
			dst = paced{w: dst, rate: uploadRate}
		}
		if !src.fromClient && downloadRate > 0 {
			dst = paced{w: dst, rate: downloadRate}
		}
		if latency > 0 {
			d := newDelayed(dst, latency/2)
			defer func() { _ = d.Close() }()
			dst = d
		}
		_, _ = io.Copy(dst, src)
	}
	go func() {
		pipe(out, &gatedReader{p: p, conn: in, gen: gen, link: l, fromClient: true})
		done <- struct{}{}
	}()
	go func() {
		pipe(in, &gatedReader{p: p, conn: out, gen: gen, link: l})
		done <- struct{}{}
	}()
	<-done // either side ended: close both (deferred), which ends the other copy
	p.mu.Lock()
	trail := l.trail
	p.mu.Unlock()
	if trail != nil {
		<-trail // a client's close does not overtake its held write
	}
}

// gatedReader holds back what it read while the proxy is held: the bytes
// are delivered late, once it is released, as a network that dropped them
// would deliver them by retransmission after it healed.
type gatedReader struct {
	p          *Proxy
	conn       net.Conn
	gen        uint64
	link       *link
	fromClient bool
}

func (g *gatedReader) Read(b []byte) (int, error) {
	n, err := g.conn.Read(b)
	large := false
	if size := g.p.armedFor(g); size > 0 && err == nil {
		n, large, err = g.lookAhead(b, n, size)
	}
	g.p.mu.Lock()
	trail := g.p.flowing
	if g.fromClient && g.link.trail != nil {
		trail = g.link.trail // sent after the triggering write
	}
	if large && g.p.armed > 0 {
		g.p.armed = 0
		g.p.holdExisting()
		select {
		case <-g.p.trail:
			g.p.trail = make(chan struct{})
		default: // an earlier trigger's trail is still held
		}
		g.link.trail = g.p.trail
		close(g.p.triggered)
	}
	held, old := g.p.held, g.p.flowing
	if g.gen <= g.p.oldGen {
		old = g.p.oldHeld
	}
	g.p.mu.Unlock()
	<-held
	<-old
	<-trail
	return n, err
}

// armedFor is the size that triggers HoldAtWrite if g's chunks can
// trigger it, or zero.
func (p *Proxy) armedFor(g *gatedReader) int {
	if !g.fromClient {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed == 0 || g.gen > p.armedGen {
		return 0
	}
	return p.armed
}

// lookAhead reads on into b after its first n bytes while chunks follow
// each other within lookAheadWindow, up to the first of at least size
// bytes (large): the headers of a write are read with its body.
func (g *gatedReader) lookAhead(b []byte, n, size int) (int, bool, error) {
	if n >= size {
		return n, true, nil
	}
	defer func() { _ = g.conn.SetReadDeadline(time.Time{}) }()
	for range 16 {
		if n == len(b) {
			break
		}
		_ = g.conn.SetReadDeadline(time.Now().Add(lookAheadWindow))
		m, err := g.conn.Read(b[n:])
		n += m
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return n, m >= size, nil
		}
		if m >= size || err != nil {
			return n, m >= size, err
		}
	}
	return n, false, nil
}

// Cut closes every connection and refuses new ones until Heal, as a
// partition that resets connections would.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	p.release(true) // bytes held back go nowhere now: their connections are closed
}

// Hold stops forwarding without closing anything, as a black hole would:
// connections stay open, new ones are accepted, and no byte passes either
// way until Heal (or Cut, which closes them). A client learns of it only
// from its own timeouts; a server never learns that its client gave up.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.held:
		p.held = make(chan struct{})
	default: // already held
	}
}

// HoldExisting holds the connections open now, as Hold does, while new
// ones flow: a path that stalled for the traffic on it, which clients that
// connect anew get around (another process, or a reconnect). What was
// sent on a held connection arrives after Heal, late, while others went on.
func (p *Proxy) HoldExisting() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdExisting()
}

// HoldAtWrite arms a HoldExisting that the first chunk of at least size
// bytes a client sends on a connection open now triggers, that chunk held
// too: with TLS the proxy cannot read requests, but a request with a body
// (a write) is larger than one without (and a connection open now is past
// its TLS handshake). While armed, a smaller chunk waits a few
// milliseconds for the next, so that a write's headers are held with its
// body. What that connection's client sends after the write, and its
// close, arrive TrailDelay after the rest (Heal). The returned channel is
// closed once it triggered.
func (p *Proxy) HoldAtWrite(size int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.armedGen = size, p.gen
	p.triggered = make(chan struct{})
	return p.triggered
}

func (p *Proxy) holdExisting() {
	p.oldGen = p.gen
	select {
	case <-p.oldHeld:
		p.oldHeld = make(chan struct{})
	default: // already held
	}
}

// Heal accepts connections again and lets held bytes through (those that
// followed a write that triggered HoldAtWrite TrailDelay later).
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.armed = 0
	trail := p.trail
	p.mu.Unlock()
	p.release(false)
	time.AfterFunc(TrailDelay, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		closeOpen(trail)
	})
}

// release ends a Hold and a HoldExisting, and with trail what follows a
// triggering write.
func (p *Proxy) release(trail bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	closeOpen(p.held)
	closeOpen(p.oldHeld)
	if trail {
		closeOpen(p.trail)
	}
}

// closeOpen closes ch unless it is closed already; callers hold p.mu.
func closeOpen(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
