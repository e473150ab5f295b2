package xiaozhi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/tools"
)

// lockedBuffer is a log sink safe for the client's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// rpcHarness is an mcpClient whose device is the test: what the client
// queues arrives on sent, and the test answers through client.handle.
type rpcHarness struct {
	client *mcpClient
	sent   chan []byte
	logs   *lockedBuffer
	leave  context.CancelFunc // the device disconnects
}

func newRPCHarness(t *testing.T, timeout time.Duration) *rpcHarness {
	t.Helper()
	h := &rpcHarness{sent: make(chan []byte, 16), logs: &lockedBuffer{}}
	gone, leave := context.WithCancel(context.Background())
	t.Cleanup(leave)
	h.leave = leave
	queue := func(ctx context.Context, p []byte) error {
		select {
		case h.sent <- p:
			return nil
		case <-gone.Done():
			return errDeviceGone
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	try := func(p []byte) bool {
		select {
		case h.sent <- p:
			return true
		default:
			return false
		}
	}
	h.client = newMCPClient(gone, timeout, zerolog.New(h.logs).Level(zerolog.DebugLevel), queue, try)
	return h
}

// next returns the next payload the client sent.
func (h *rpcHarness) next(t *testing.T) rpcRequestSeen {
	t.Helper()
	select {
	case p := <-h.sent:
		var r rpcRequestSeen
		if err := json.Unmarshal(p, &r); err != nil {
			t.Fatalf("client sent %s: %v", p, err)
		}
		r.raw = p
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the client sent nothing")
		return rpcRequestSeen{}
	}
}

type rpcRequestSeen struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcError       `json:"error"`
	raw     []byte
}

type rpcOutcome struct {
	res json.RawMessage
	err error
}

func (h *rpcHarness) start(method string) <-chan rpcOutcome {
	out := make(chan rpcOutcome, 1)
	go func() {
		res, err := h.client.request(context.Background(), method, map[string]any{"cursor": ""})
		out <- rpcOutcome{res, err}
	}()
	return out
}

func waitOutcome(t *testing.T, ch <-chan rpcOutcome, within time.Duration) rpcOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(within):
		t.Fatalf("request still waiting after %v", within)
		return rpcOutcome{}
	}
}

// TestMCPClientMatchesByID: answers coming in another order than the
// requests reach the request of their id; ids are JSON numbers (the
// firmware drops string ids) and the envelope is JSON-RPC 2.0.
func TestMCPClientMatchesByID(t *testing.T) {
	h := newRPCHarness(t, 5*time.Second)
	a := h.start("tools/list")
	ra := h.next(t)
	b := h.start("tools/call")
	rb := h.next(t)
	for _, r := range []rpcRequestSeen{ra, rb} {
		var id float64
		if r.JSONRPC != "2.0" || json.Unmarshal(r.ID, &id) != nil || id < 1 {
			t.Errorf("request %s: want jsonrpc 2.0 and a positive integer id", r.raw)
		}
	}
	if bytes.Equal(ra.ID, rb.ID) {
		t.Fatalf("two requests with id %s", ra.ID)
	}
	h.client.handle(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"who":"b"}}`, rb.ID))
	h.client.handle(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"who":"a"}}`, ra.ID))
	if o := waitOutcome(t, a, time.Second); o.err != nil || string(o.res) != `{"who":"a"}` {
		t.Errorf("first request got %s, %v", o.res, o.err)
	}
	if o := waitOutcome(t, b, time.Second); o.err != nil || string(o.res) != `{"who":"b"}` {
		t.Errorf("second request got %s, %v", o.res, o.err)
	}
}

// TestMCPClientDeviceError: the firmware's error answer (a message, no
// code) is a *DeviceError naming the method.
func TestMCPClientDeviceError(t *testing.T) {
	h := newRPCHarness(t, 5*time.Second)
	o := h.start("tools/call")
	r := h.next(t)
	h.client.handle(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"message":"Unknown tool: self.nothing"}}`, r.ID))
	got := waitOutcome(t, o, time.Second)
	var de *DeviceError
	if !errors.As(got.err, &de) || de.Message != "Unknown tool: self.nothing" || de.Method != "tools/call" || de.Code != 0 {
		t.Fatalf("got %v, want a DeviceError for tools/call", got.err)
	}
	if !strings.Contains(got.err.Error(), "Unknown tool: self.nothing") {
		t.Errorf("error text %q does not carry the device's message", got.err)
	}
}

// TestMCPClientLateAnswer: a device that does not answer in time gives a
// timeout; its answer coming later is logged as late and dropped, once.
func TestMCPClientLateAnswer(t *testing.T) {
	h := newRPCHarness(t, 50*time.Millisecond)
	o := h.start("tools/call")
	r := h.next(t)
	start := time.Now()
	got := waitOutcome(t, o, 2*time.Second)
	if !isTimeout(got.err) || errors.Is(got.err, tools.ErrUnavailable) {
		t.Fatalf("got %v, want a timeout", got.err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("timed out after %v, want about 50ms", el)
	}
	late := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{}}`, r.ID)
	h.client.handle(late)
	h.client.handle(late)
	logs := h.logs.String()
	if n := strings.Count(logs, "after its request timed out"); n != 1 {
		t.Errorf("late answer logged %d times, want once:\n%s", n, logs)
	}
	// The session goes on: the next request is answered.
	o = h.start("tools/list")
	r = h.next(t)
	h.client.handle(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"ok":true}}`, r.ID))
	if got := waitOutcome(t, o, time.Second); got.err != nil || string(got.res) != `{"ok":true}` {
		t.Errorf("after the late answer: %s, %v", got.res, got.err)
	}
}

// TestMCPClientDisconnect: a device that leaves fails the request waiting
// on it at once with an error wrapping tools.ErrUnavailable, and every
// later one too.
func TestMCPClientDisconnect(t *testing.T) {
	h := newRPCHarness(t, 10*time.Second)
	o := h.start("tools/call")
	h.next(t)
	h.leave()
	got := waitOutcome(t, o, time.Second)
	if !errors.Is(got.err, tools.ErrUnavailable) || isTimeout(got.err) {
		t.Fatalf("got %v, want an error wrapping tools.ErrUnavailable", got.err)
	}
	o = h.start("tools/call")
	if got := waitOutcome(t, o, time.Second); !errors.Is(got.err, tools.ErrUnavailable) {
		t.Errorf("after the disconnect: %v", got.err)
	}
}

// TestMCPClientDeviceRequests: the device's own requests are answered
// (ping with an empty result, anything else method not found);
// notifications, answers to nothing, string ids and non-JSON are
// dropped without a reply.
func TestMCPClientDeviceRequests(t *testing.T) {
	h := newRPCHarness(t, time.Second)
	h.client.handle([]byte(`{"jsonrpc":"2.0","id":7,"method":"ping"}`))
	if r := h.next(t); string(r.ID) != "7" || string(r.Result) != "{}" || r.Error != nil {
		t.Errorf("ping answered %s", r.raw)
	}
	h.client.handle([]byte(`{"jsonrpc":"2.0","id":"x","method":"sampling/createMessage"}`))
	if r := h.next(t); string(r.ID) != `"x"` || r.Error == nil || r.Error.Code != rpcMethodNotFound {
		t.Errorf("unknown method answered %s", r.raw)
	}
	h.client.handle([]byte(`{"jsonrpc":"1.0","id":8,"method":"ping"}`))
	if r := h.next(t); r.Error == nil || r.Error.Code != rpcInvalidRequest {
		t.Errorf("jsonrpc 1.0 answered %s", r.raw)
	}
	for _, p := range []string{
		`{"jsonrpc":"2.0","method":"notifications/state_changed","params":{}}`,
		`{"jsonrpc":"2.0","id":99,"result":{}}`,
		`{"jsonrpc":"2.0","id":"1","result":{}}`,
		`not json`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
	} {
		h.client.handle([]byte(p))
	}
	select {
	case p := <-h.sent:
		t.Errorf("answered a message that wants no answer: %s", p)
	case <-time.After(50 * time.Millisecond):
	}
}
