package xiaozhi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/tools"
)

// The device is an MCP server on its own WebSocket (reference §8, read in
// 78/xiaozhi-esp32 main/mcp_server.cc); voxpipe is its client. What the
// firmware does that shapes this client:
//   - it answers only requests whose id is a JSON number (string ids are
//     dropped without a reply), so ids here are integers;
//   - its error replies carry only a message (no code);
//   - tools/list pages at about 8000 bytes and names the next page's first
//     tool in nextCursor; withUserTools:true would add privileged tools
//     (reboot, upgrade) meant for a companion app, never for a model;
//   - it ignores every method starting with "notifications" and sends no
//     requests of its own today.

// JSON-RPC 2.0 error codes voxpipe answers device requests with.
const (
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
)

// mcpProtocolVersion is the MCP revision the firmware implements.
const mcpProtocolVersion = "2024-11-05"

// maxListPages bounds tools/list paging against a device whose cursors
// never end.
const maxListPages = 64

// lateKept is how many timed-out request ids are remembered, so that their
// late answers are logged as such.
const lateKept = 32

var (
	// errDeviceTimeout: the device did not answer within MCPTimeout. It
	// wraps context.DeadlineExceeded, so callers see a timeout.
	errDeviceTimeout = fmt.Errorf("device did not answer in time: %w", context.DeadlineExceeded)
	// errDeviceGone: the session ended before the answer came.
	errDeviceGone = fmt.Errorf("the device disconnected: %w", tools.ErrUnavailable)
)

// rpcMessage is a JSON-RPC 2.0 object in either direction.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code,omitempty"` // the firmware sends none
	Message string `json:"message"`
}

// rpcRequest is what voxpipe sends; ID 0 marks a notification.
type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// DeviceError is a device's JSON-RPC error answer.
type DeviceError struct {
	Method, Message string
	Code            int // 0: none given (the firmware gives none)
}

func (e *DeviceError) Error() string {
	return fmt.Sprintf("the device refused %s: %s", e.Method, e.Message)
}

// lateCall is a request given up on, remembered to log its late answer.
type lateCall struct {
	method string
	at     time.Time // when it was given up
}

// mcpClient speaks JSON-RPC with one device: it numbers requests, matches
// answers to them by id and answers the device's own requests. Requests
// block their caller (a turn's tool call, the discovery goroutine); handle
// runs on the connection's reader and never blocks.
type mcpClient struct {
	// queue hands a payload to the writer, blocking until it is queued,
	// ctx ends or the session ends; tryQueue does not block (the reader's
	// replies).
	queue    func(ctx context.Context, payload []byte) error
	tryQueue func(payload []byte) bool
	// gone is the session's context: done once the device is gone.
	gone    context.Context
	timeout time.Duration
	log     zerolog.Logger

	mu      sync.Mutex // guards the fields below
	nextID  int64
	pending map[int64]chan rpcMessage // each buffered 1, sent at most once
	late    map[int64]lateCall
	lateIDs []int64 // late's keys, oldest first
}

func newMCPClient(gone context.Context, timeout time.Duration, log zerolog.Logger,
	queue func(context.Context, []byte) error, tryQueue func([]byte) bool) *mcpClient {
	return &mcpClient{queue: queue, tryQueue: tryQueue, gone: gone, timeout: timeout, log: log,
		pending: map[int64]chan rpcMessage{}, late: map[int64]lateCall{}}
}

// request sends method and waits, at most the client's timeout, for the
// device's answer: its result, a *DeviceError, an error wrapping
// context.DeadlineExceeded (no answer in time), errDeviceGone, or ctx's
// error.
func (m *mcpClient) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch := make(chan rpcMessage, 1)
	m.mu.Lock()
	m.nextID++
	id := m.nextID
	m.pending[id] = ch
	m.mu.Unlock()
	payload, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		m.forget(id, method, false)
		return nil, fmt.Errorf("mcp %s: %w", method, err)
	}
	tctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	if err := m.queue(tctx, payload); err != nil {
		m.forget(id, method, false)
		return nil, m.waitErr(ctx, method)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return nil, &DeviceError{Method: method, Message: r.Error.Message, Code: r.Error.Code}
		}
		return r.Result, nil
	case <-tctx.Done():
		m.forget(id, method, true)
		return nil, m.waitErr(ctx, method)
	case <-m.gone.Done():
		m.forget(id, method, false)
		return nil, fmt.Errorf("mcp %s: %w", method, errDeviceGone)
	}
}

// waitErr says why a request stopped waiting without an answer.
func (m *mcpClient) waitErr(ctx context.Context, method string) error {
	switch {
	case m.gone.Err() != nil:
		return fmt.Errorf("mcp %s: %w", method, errDeviceGone)
	case ctx.Err() != nil:
		return fmt.Errorf("mcp %s: %w", method, ctx.Err())
	default:
		return fmt.Errorf("mcp %s: %w (%v)", method, errDeviceTimeout, m.timeout)
	}
}

// forget drops a request nobody waits for any more; asLate remembers it so
// that an answer coming after all is logged as late.
func (m *mcpClient) forget(id int64, method string, asLate bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pending, id)
	if !asLate {
		return
	}
	if len(m.lateIDs) == lateKept {
		delete(m.late, m.lateIDs[0])
		m.lateIDs = m.lateIDs[1:]
	}
	m.late[id] = lateCall{method: method, at: time.Now()}
	m.lateIDs = append(m.lateIDs, id)
}

// notify sends a notification (no answer comes).
func (m *mcpClient) notify(ctx context.Context, method string) error {
	payload, err := json.Marshal(rpcRequest{JSONRPC: "2.0", Method: method})
	if err != nil {
		return err
	}
	return m.queue(ctx, payload)
}

// handle takes one JSON-RPC object from the device (the reader's; it must
// not block): an answer goes to the request waiting for it, a request of
// the device's own is answered.
func (m *mcpClient) handle(payload []byte) {
	var msg rpcMessage
	if err := json.Unmarshal(payload, &msg); err != nil {
		m.log.Debug().Err(err).Msg("device mcp message is not a JSON-RPC object; ignored")
		return
	}
	if msg.Method != "" || msg.Result == nil && msg.Error == nil {
		answerDeviceRequest(msg, m.tryQueue, m.log)
		return
	}
	id, err := strconv.ParseInt(string(msg.ID), 10, 64)
	if err != nil {
		m.log.Debug().RawJSON("id", nonEmptyJSON(msg.ID)).Msg("device mcp answer without an integer id; ignored")
		return
	}
	m.mu.Lock()
	ch, ok := m.pending[id]
	delete(m.pending, id)
	late, wasLate := m.late[id]
	if wasLate {
		delete(m.late, id) // a second answer to it is no news
		m.lateIDs = slices.DeleteFunc(m.lateIDs, func(x int64) bool { return x == id })
	}
	m.mu.Unlock()
	switch {
	case ok:
		ch <- msg // buffered and sent once: never blocks
	case wasLate:
		m.log.Info().Int64("id", id).Str("method", late.method).Dur("after_timeout", time.Since(late.at)).
			Msg("device mcp answer came after its request timed out; dropped")
	default:
		m.log.Debug().Int64("id", id).Msg("device mcp answer to no request of this session; dropped")
	}
}

// answerDeviceRequest answers a request the device sent: ping as MCP asks
// (an empty result), anything else "method not found"; notifications (no
// id) get no answer, as JSON-RPC says, and are ignored.
func answerDeviceRequest(msg rpcMessage, tryQueue func([]byte) bool, log zerolog.Logger) {
	id := msg.ID
	if len(bytes.TrimSpace(id)) == 0 || bytes.Equal(bytes.TrimSpace(id), []byte("null")) {
		log.Debug().Str("method", msg.Method).Msg("device mcp notification ignored")
		return
	}
	reply := rpcMessage{JSONRPC: "2.0", ID: id}
	switch {
	case msg.JSONRPC != "2.0" || msg.Method == "":
		reply.Error = &rpcError{Code: rpcInvalidRequest, Message: "invalid request: want a JSON-RPC 2.0 request with a method"}
	case msg.Method == "ping":
		reply.Result = json.RawMessage(`{}`)
	default:
		reply.Error = &rpcError{Code: rpcMethodNotFound, Message: "method not found: " + msg.Method}
	}
	data, err := json.Marshal(reply)
	if err != nil {
		log.Debug().Err(err).Msg("device mcp request: unanswerable id")
		return
	}
	if !tryQueue(data) {
		log.Debug().Str("method", msg.Method).Msg("device mcp request: reply dropped (the writer is behind or gone)")
		return
	}
	log.Debug().Str("method", msg.Method).Msg("device mcp request answered")
}

func nonEmptyJSON(b json.RawMessage) []byte {
	if len(b) == 0 || !json.Valid(b) {
		return []byte("null")
	}
	return b
}

// isTimeout reports a request that got no answer in time.
func isTimeout(err error) bool { return errors.Is(err, context.DeadlineExceeded) }
