package lkagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/livekit/protocol/auth"
	lkp "github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/voxpipe/voxpipe/pipeline"
)

// Data packet topics of a job's room.
const (
	// EventsTopic carries the session's events (pipeline.Event as JSON),
	// agent to room.
	EventsTopic = "voxpipe.events"
	// ControlTopic carries a participant's control messages
	// (playback_start, interrupt, stop; docs/protocol.md), room to agent.
	ControlTopic = "voxpipe.control"
)

const (
	defaultMaxJobs      = 4
	defaultTurnWait     = 30 * time.Second
	defaultMicWait      = 60 * time.Second
	defaultIdentity     = "voxpipe-agent"
	defaultOpusBitrate  = 24000
	registerTimeout     = 10 * time.Second
	writeTimeout        = 5 * time.Second
	reconnectMin        = 500 * time.Millisecond
	reconnectMax        = 10 * time.Second
	workerTokenValidFor = 24 * time.Hour
	// pendingTTL is how long a job slot stays promised after a yes to an
	// availability request: the server assigns within a few seconds or
	// gives the job to another worker (its AssignJobTimeout).
	pendingTTL = 15 * time.Second
)

// Config configures a Worker.
type Config struct {
	// URL is the LiveKit server: ws://, wss://, http:// or https:// and
	// host (the /agent path is added).
	URL string
	// APIKey and APISecret sign the worker's token (it needs the agent
	// grant; any key of the server has it).
	APIKey, APISecret string
	// AgentName: empty, the worker is dispatched to every new room;
	// named, only where a dispatch names it (a token's room configuration
	// or the AgentDispatch API).
	AgentName string
	// Identity prefixes the agent's participant identity in a room (the
	// job id follows). Default "voxpipe-agent".
	Identity string
	// MaxJobs is how many conversations the worker holds at once; at that
	// many it reports WS_FULL and declines jobs. 0 = 4.
	MaxJobs int
	// DrainTimeout is how long running conversations may go on once Run's
	// ctx has ended; then each is ended between turns. 0 = end them at
	// once (still between turns).
	DrainTimeout time.Duration
	// TurnWait bounds the wait for a turn in flight when a job is ended
	// between turns. 0 = 30 s.
	TurnWait time.Duration
	// MicWait is how long a job waits for a participant's microphone
	// track before it gives the room up. 0 = 60 s.
	MicWait time.Duration
	// Pipeline is each session's config; its rates are set to 48 kHz.
	Pipeline pipeline.Config
	// OpusBitrate of the answer track (bits/s); 0 = 24000, as the web
	// transports.
	OpusBitrate int
	// Version is reported at registration.
	Version string
	// Observer, when set, returns a session's observer (metrics, traces).
	Observer func(session string) pipeline.Observer
}

// Worker is one LiveKit agent worker. Create it with New and serve with
// Run.
type Worker struct {
	cfg Config
	be  pipeline.Backends
	log zerolog.Logger

	wmu  sync.Mutex      // serialises writes to conn (one concurrent writer)
	conn *websocket.Conn // guarded by wmu; nil between connections

	mu       sync.Mutex // guards the fields below
	id       string     // the worker id of the latest registration
	jobs     map[string]*job
	pending  map[string]time.Time // availability granted, assignment awaited
	draining bool

	jobsWG sync.WaitGroup // job goroutines
}

// New checks cfg and returns a worker; nothing connects until Run.
func New(cfg Config, be pipeline.Backends, log zerolog.Logger) (*Worker, error) {
	if cfg.URL == "" || cfg.APIKey == "" || cfg.APISecret == "" {
		return nil, fmt.Errorf("%w: the LiveKit URL, API key and API secret are all required", ErrConfig)
	}
	if _, err := controlURL(cfg.URL); err != nil {
		return nil, err
	}
	if cfg.MaxJobs < 0 {
		return nil, fmt.Errorf("%w: max jobs %d is negative", ErrConfig, cfg.MaxJobs)
	}
	if cfg.MaxJobs == 0 {
		cfg.MaxJobs = defaultMaxJobs
	}
	if cfg.TurnWait <= 0 {
		cfg.TurnWait = defaultTurnWait
	}
	if cfg.MicWait <= 0 {
		cfg.MicWait = defaultMicWait
	}
	if cfg.OpusBitrate == 0 {
		cfg.OpusBitrate = defaultOpusBitrate
	}
	if cfg.Identity == "" {
		cfg.Identity = defaultIdentity
	}
	if be.ASR == nil || be.LLM == nil || be.TTS == nil {
		return nil, fmt.Errorf("%w: the ASR, LLM and TTS backends are all required", ErrConfig)
	}
	// The SDK logs through one process-wide logger; the worker is its
	// user in this process.
	lksdk.SetLogger(sdkLogger(log))
	return &Worker{cfg: cfg, be: be, log: log, jobs: map[string]*job{}, pending: map[string]time.Time{}}, nil
}

// controlURL is the worker protocol's WebSocket URL on the server at raw.
func controlURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: LiveKit URL %q: %w", ErrConfig, raw, err)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("%w: LiveKit URL %q: want ws://, wss://, http:// or https://", ErrConfig, raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%w: LiveKit URL %q has no host", ErrConfig, raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/agent"
	u.RawQuery = url.Values{"protocol": {fmt.Sprint(lkp.CurrentWorkerProtocol)}}.Encode()
	return u.String(), nil
}

// Jobs returns how many conversations the worker holds now.
func (w *Worker) Jobs() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.jobs)
}

// Run registers the worker and serves jobs until ctx ends, then drains:
// no new jobs, running ones go on for DrainTimeout and are then ended
// between turns. It returns once every job has ended. The first
// registration's failure (server unreachable, key refused) is returned at
// once; a connection lost later is re-established with backoff while the
// jobs, which hold their own room connections, go on.
func (w *Worker) Run(ctx context.Context) error {
	conn, err := w.register(ctx)
	if err != nil {
		return err
	}
	// The control connection outlives ctx: during the drain it still
	// reports the jobs' ends and declines new ones.
	connCtx, stopConn := context.WithCancel(context.WithoutCancel(ctx))
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		w.connLoop(connCtx, conn)
	}()

	<-ctx.Done()
	w.drain()
	stopConn()
	<-loopDone
	return nil
}

// drain refuses new jobs, waits DrainTimeout for the running ones to end,
// then ends the rest between turns and waits for them.
func (w *Worker) drain() {
	w.mu.Lock()
	w.draining = true
	n := len(w.jobs)
	w.mu.Unlock()
	w.report()
	w.log.Info().Int("jobs", n).Dur("drain_timeout", w.cfg.DrainTimeout).Msg("livekit worker draining: no new jobs")
	idle := make(chan struct{})
	go func() {
		w.jobsWG.Wait()
		close(idle)
	}()
	timer := time.NewTimer(w.cfg.DrainTimeout)
	defer timer.Stop()
	select {
	case <-idle:
		return
	case <-timer.C:
	}
	w.mu.Lock()
	left := make([]*job, 0, len(w.jobs))
	for _, j := range w.jobs {
		left = append(left, j)
	}
	w.mu.Unlock()
	w.log.Info().Int("jobs", len(left)).Msg("drain deadline: ending each conversation after its current turn")
	for _, j := range left {
		j.finish()
	}
	<-idle
}

// connLoop serves conn, and after it drops, new connections, until ctx
// ends.
func (w *Worker) connLoop(ctx context.Context, conn *websocket.Conn) {
	backoff := reconnectMin
	for {
		err := w.serve(ctx, conn)
		if ctx.Err() != nil {
			return
		}
		w.log.Warn().Err(err).Msg("livekit control connection lost; reconnecting")
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			conn, err = w.register(ctx)
			if err == nil {
				backoff = reconnectMin
				w.report() // the server knows nothing of the jobs still running
				break
			}
			backoff = min(2*backoff, reconnectMax)
			w.log.Warn().Err(err).Dur("retry_in", backoff).Msg("livekit worker registration")
		}
	}
}

// register dials the server's /agent endpoint and registers; it returns
// the connection, now the one writes go to.
func (w *Worker) register(ctx context.Context) (*websocket.Conn, error) {
	target, err := controlURL(w.cfg.URL)
	if err != nil {
		return nil, err
	}
	at := auth.NewAccessToken(w.cfg.APIKey, w.cfg.APISecret)
	at.SetVideoGrant(&auth.VideoGrant{Agent: true}).SetValidFor(workerTokenValidFor)
	token, err := at.ToJWT()
	if err != nil {
		return nil, fmt.Errorf("%w: worker token: %w", ErrConfig, err)
	}
	dctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	conn, resp, err := websocket.DefaultDialer.DialContext(dctx, target, http.Header{"Authorization": {"Bearer " + token}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("%w: %s answered %s: %w", ErrRegister, target, resp.Status, err)
		}
		return nil, fmt.Errorf("%w: dial %s: %w", ErrRegister, target, err)
	}
	reg := &lkp.WorkerMessage{Message: &lkp.WorkerMessage_Register{Register: &lkp.RegisterWorkerRequest{
		Type:      lkp.JobType_JT_ROOM,
		AgentName: w.cfg.AgentName,
		Version:   w.cfg.Version,
	}}}
	if err := writeMsg(conn, reg); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("%w: %w", ErrRegister, err)
	}
	deadline, _ := dctx.Deadline()
	_ = conn.SetReadDeadline(deadline)
	for {
		msg, err := readMsg(conn)
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("%w: waiting for the server's answer: %w", ErrRegister, err)
		}
		if r := msg.GetRegister(); r != nil {
			_ = conn.SetReadDeadline(time.Time{})
			w.mu.Lock()
			w.id = r.GetWorkerId()
			w.mu.Unlock()
			w.wmu.Lock()
			w.conn = conn
			w.wmu.Unlock()
			w.log.Info().Str("worker", r.GetWorkerId()).Str("agent_name", w.cfg.AgentName).
				Str("server", r.GetServerInfo().GetVersion()).Int("max_jobs", w.cfg.MaxJobs).Msg("livekit worker registered")
			return conn, nil
		}
	}
}

// serve reads conn until it fails or ctx ends.
func (w *Worker) serve(ctx context.Context, conn *websocket.Conn) error {
	stop := context.AfterFunc(ctx, func() {
		w.wmu.Lock()
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "worker stopping"), time.Now().Add(time.Second))
		w.wmu.Unlock()
		_ = conn.Close()
	})
	defer stop()
	defer func() {
		w.wmu.Lock()
		if w.conn == conn {
			w.conn = nil
		}
		w.wmu.Unlock()
		_ = conn.Close()
	}()
	for {
		msg, err := readMsg(conn)
		if err != nil {
			return err
		}
		switch m := msg.GetMessage().(type) {
		case *lkp.ServerMessage_Availability:
			w.answerAvailability(m.Availability)
		case *lkp.ServerMessage_Assignment:
			w.assign(m.Assignment)
		case *lkp.ServerMessage_Termination:
			w.terminate(m.Termination.GetJobId())
		}
	}
}

// answerAvailability says yes while a job slot is free (and promises it),
// no when full or draining.
func (w *Worker) answerAvailability(req *lkp.AvailabilityRequest) {
	jobID := req.GetJob().GetId()
	now := time.Now()
	w.mu.Lock()
	for id, at := range w.pending {
		if now.Sub(at) > pendingTTL {
			delete(w.pending, id)
		}
	}
	taken := len(w.jobs) + len(w.pending)
	ok := !w.draining && taken < w.cfg.MaxJobs
	if ok {
		w.pending[jobID] = now
	}
	draining := w.draining
	w.mu.Unlock()
	w.log.Info().Str("job", jobID).Str("room", req.GetJob().GetRoom().GetName()).Bool("accepted", ok).
		Int("jobs", taken).Bool("draining", draining).Msg("livekit job offered")
	resp := &lkp.AvailabilityResponse{JobId: jobID, Available: ok}
	if ok {
		resp.ParticipantIdentity = w.cfg.Identity + "-" + jobID
		resp.ParticipantName = "voxpipe"
	}
	w.send(&lkp.WorkerMessage{Message: &lkp.WorkerMessage_Availability{Availability: resp}})
	if ok {
		w.report() // the promised slot counts
	}
}

// assign starts the assigned job.
func (w *Worker) assign(a *lkp.JobAssignment) {
	jobID := a.GetJob().GetId()
	roomURL := w.cfg.URL
	if a.Url != nil && a.GetUrl() != "" {
		roomURL = a.GetUrl()
	}
	w.mu.Lock()
	_, promised := w.pending[jobID]
	delete(w.pending, jobID)
	_, dup := w.jobs[jobID]
	if dup || (!promised && (w.draining || len(w.jobs)+len(w.pending) >= w.cfg.MaxJobs)) {
		w.mu.Unlock()
		w.log.Warn().Str("job", jobID).Bool("duplicate", dup).Msg("livekit assignment refused: no slot for it")
		if !dup {
			w.jobStatus(jobID, errors.New("worker full"))
		}
		return
	}
	j := newJob(w, a.GetJob(), roomURL, a.GetToken())
	w.jobs[jobID] = j
	w.jobsWG.Add(1)
	w.mu.Unlock()
	w.report()
	go func() {
		defer w.jobsWG.Done()
		err := j.run()
		w.mu.Lock()
		delete(w.jobs, jobID)
		w.mu.Unlock()
		w.jobStatus(jobID, err)
		w.report()
	}()
}

// terminate ends a job the server ended (the room closed, a dispatch
// deleted).
func (w *Worker) terminate(jobID string) {
	w.mu.Lock()
	j := w.jobs[jobID]
	w.mu.Unlock()
	if j != nil {
		w.log.Info().Str("job", jobID).Msg("livekit job terminated by the server")
		j.cancel()
	}
}

// report tells the server the worker's load; at capacity, or draining,
// it is WS_FULL and gets no jobs.
func (w *Worker) report() {
	w.mu.Lock()
	n := len(w.jobs) + len(w.pending)
	status := lkp.WorkerStatus_WS_AVAILABLE
	if w.draining || n >= w.cfg.MaxJobs {
		status = lkp.WorkerStatus_WS_FULL
	}
	upd := &lkp.UpdateWorkerStatus{
		Status:   &status,
		Load:     float32(n) / float32(w.cfg.MaxJobs),
		JobCount: uint32(len(w.jobs)),
	}
	w.mu.Unlock()
	w.send(&lkp.WorkerMessage{Message: &lkp.WorkerMessage_UpdateWorker{UpdateWorker: upd}})
}

// jobStatus reports a job's end: success, or failure with err.
func (w *Worker) jobStatus(jobID string, err error) {
	st := &lkp.UpdateJobStatus{JobId: jobID, Status: lkp.JobStatus_JS_SUCCESS}
	if err != nil {
		st.Status, st.Error = lkp.JobStatus_JS_FAILED, err.Error()
	}
	w.send(&lkp.WorkerMessage{Message: &lkp.WorkerMessage_UpdateJob{UpdateJob: st}})
}

// jobRunning reports a job whose session has started.
func (w *Worker) jobRunning(jobID string) {
	w.send(&lkp.WorkerMessage{Message: &lkp.WorkerMessage_UpdateJob{UpdateJob: &lkp.UpdateJobStatus{
		JobId: jobID, Status: lkp.JobStatus_JS_RUNNING,
	}}})
}

// send writes msg on the current control connection; with none (between
// connections) it is dropped: a re-registration reports the state afresh.
func (w *Worker) send(msg *lkp.WorkerMessage) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if w.conn == nil {
		return
	}
	if err := writeMsg(w.conn, msg); err != nil {
		w.log.Debug().Err(err).Msg("livekit control write failed")
	}
}

func writeMsg(conn *websocket.Conn, msg *lkp.WorkerMessage) error {
	data, err := proto.Marshal(msg)
	if err != nil {
		return err
	}
	_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	return conn.WriteMessage(websocket.BinaryMessage, data)
}

func readMsg(conn *websocket.Conn) (*lkp.ServerMessage, error) {
	for {
		typ, data, err := conn.ReadMessage()
		if err != nil {
			return nil, err
		}
		if typ != websocket.BinaryMessage {
			continue // the server answers protobuf to a protobuf worker
		}
		msg := &lkp.ServerMessage{}
		if err := proto.Unmarshal(data, msg); err != nil {
			return nil, fmt.Errorf("lkagent: bad server message: %w", err)
		}
		return msg, nil
	}
}

// ServeHTTP answers a health check (GET /healthz): 200 "ok" while the
// worker takes jobs, 503 "draining" once Run's ctx has ended, with the
// jobs it holds and its capacity.
func (w *Worker) ServeHTTP(rw http.ResponseWriter, _ *http.Request) {
	w.mu.Lock()
	status, code := "ok", http.StatusOK
	if w.draining {
		status, code = "draining", http.StatusServiceUnavailable
	}
	jobs := len(w.jobs)
	w.mu.Unlock()
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	_ = json.NewEncoder(rw).Encode(struct {
		Status  string `json:"status"`
		Jobs    int    `json:"jobs"`
		MaxJobs int    `json:"max_jobs"`
	}{status, jobs, w.cfg.MaxJobs})
}
