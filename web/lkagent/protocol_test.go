package lkagent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/livekit/protocol/auth"
	lkp "github.com/livekit/protocol/livekit"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
)

// fakeAgentServer is the server end of the worker protocol, as
// livekit-server's /agent speaks it, for tests that need no real server:
// it checks the worker's token, confirms the registration and hands the
// test every later worker message.
type fakeAgentServer struct {
	t     *testing.T
	conns chan *websocket.Conn
	msgs  chan *lkp.WorkerMessage
}

func newFakeAgentServer(t *testing.T) (*fakeAgentServer, string) {
	f := &fakeAgentServer{t: t, conns: make(chan *websocket.Conn, 1), msgs: make(chan *lkp.WorkerMessage, 64)}
	hs := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(hs.Close)
	return f, hs.URL
}

func (f *fakeAgentServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/agent" || r.URL.Query().Get("protocol") == "" {
		http.Error(w, "want /agent?protocol=N", http.StatusNotFound)
		return
	}
	v, err := auth.ParseAPIToken(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	if err != nil || v.APIKey() != "k" {
		http.Error(w, "bad token", http.StatusUnauthorized)
		return
	}
	if _, grants, err := v.Verify("s"); err != nil || grants.Video == nil || !grants.Video.Agent {
		http.Error(w, "token lacks the agent grant", http.StatusUnauthorized)
		return
	}
	conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	reg := f.read(conn)
	if reg.GetRegister().GetType() != lkp.JobType_JT_ROOM {
		f.t.Errorf("first message %v, want a room-job registration", reg)
		return
	}
	f.write(conn, &lkp.ServerMessage{Message: &lkp.ServerMessage_Register{Register: &lkp.RegisterWorkerResponse{
		WorkerId: "AW_test", ServerInfo: &lkp.ServerInfo{Version: "fake"},
	}}})
	f.conns <- conn
	for {
		m := f.read(conn)
		if m == nil {
			return
		}
		f.msgs <- m
	}
}

func (f *fakeAgentServer) read(conn *websocket.Conn) *lkp.WorkerMessage {
	_, data, err := conn.ReadMessage()
	if err != nil {
		return nil
	}
	m := &lkp.WorkerMessage{}
	if err := proto.Unmarshal(data, m); err != nil {
		f.t.Errorf("worker message not protobuf: %v", err)
		return nil
	}
	return m
}

func (f *fakeAgentServer) write(conn *websocket.Conn, m *lkp.ServerMessage) {
	data, err := proto.Marshal(m)
	if err == nil {
		err = conn.WriteMessage(websocket.BinaryMessage, data)
	}
	if err != nil {
		f.t.Errorf("server write: %v", err)
	}
}

// next returns the next worker message that match accepts.
func (f *fakeAgentServer) next(what string, match func(*lkp.WorkerMessage) bool) *lkp.WorkerMessage {
	f.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-f.msgs:
			if match(m) {
				return m
			}
		case <-timeout:
			f.t.Fatalf("no %s from the worker within 10 s", what)
			return nil
		}
	}
}

func offer(jobID string) *lkp.ServerMessage {
	return &lkp.ServerMessage{Message: &lkp.ServerMessage_Availability{Availability: &lkp.AvailabilityRequest{
		Job: &lkp.Job{Id: jobID, Type: lkp.JobType_JT_ROOM, Room: &lkp.Room{Name: "room-" + jobID}},
	}}}
}

// TestWorkerProtocol: against a fake /agent, the worker registers with an
// agent-grant token, takes a job offer while it has a slot (naming its
// participant identity), then reports itself full and declines the next
// offer; stopped, it reports full again and closes the connection.
func TestWorkerProtocol(t *testing.T) {
	f, url := newFakeAgentServer(t)
	w, err := New(Config{URL: url, APIKey: "k", APISecret: "s", MaxJobs: 1, Version: "test"}, fakeBackends(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var conn *websocket.Conn
	select {
	case conn = <-f.conns:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not register within 10 s")
	}

	f.write(conn, offer("AJ_one"))
	yes := f.next("availability answer", func(m *lkp.WorkerMessage) bool { return m.GetAvailability() != nil }).GetAvailability()
	if yes.GetJobId() != "AJ_one" || !yes.GetAvailable() || !strings.Contains(yes.GetParticipantIdentity(), "AJ_one") {
		t.Errorf("first offer answered %v, want available with an identity naming the job", yes)
	}
	full := f.next("status update", func(m *lkp.WorkerMessage) bool { return m.GetUpdateWorker() != nil }).GetUpdateWorker()
	if full.GetStatus() != lkp.WorkerStatus_WS_FULL || full.GetLoad() != 1 {
		t.Errorf("after taking its one slot: status %v load %v, want WS_FULL at load 1", full.GetStatus(), full.GetLoad())
	}
	f.write(conn, offer("AJ_two"))
	no := f.next("availability answer", func(m *lkp.WorkerMessage) bool { return m.GetAvailability() != nil }).GetAvailability()
	if no.GetJobId() != "AJ_two" || no.GetAvailable() {
		t.Errorf("second offer answered %v, want declined (full)", no)
	}

	cancel()
	drain := f.next("status update on stop", func(m *lkp.WorkerMessage) bool { return m.GetUpdateWorker() != nil }).GetUpdateWorker()
	if drain.GetStatus() != lkp.WorkerStatus_WS_FULL {
		t.Errorf("stopping: status %v, want WS_FULL", drain.GetStatus())
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the stop")
	}
}

// TestWorkerRefusedKey: a key the server refuses fails Run at once, saying
// so.
func TestWorkerRefusedKey(t *testing.T) {
	_, url := newFakeAgentServer(t)
	w, err := New(Config{URL: url, APIKey: "other", APISecret: "s"}, fakeBackends(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	err = w.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Run with a refused key: %v, want a registration error naming HTTP 401", err)
	}
}
