package xiaozhi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/tools"
)

// Device tool names the server builds on (the firmware's common tools,
// main/mcp_server.cc AddCommonTools).
const (
	toolDeviceStatus = "self.get_device_status"
	toolSetVolume    = "self.audio_speaker.set_volume"
	toolTakePhoto    = "self.camera.take_photo"
	// toolAdjustVolume is voxpipe's own: one call for "louder" / "quieter"
	// where the device needs two (read the volume, then set it), which a
	// small model gets wrong more often than it gets one call wrong.
	toolAdjustVolume = "adjust_volume"
)

// toolCacheDevices bounds how many devices' tool lists a server remembers.
const toolCacheDevices = 1024

// mcpTool is one entry of a device's tools/list answer.
type mcpTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations *struct {
		Audience []string `json:"audience"`
	} `json:"annotations,omitempty"`
}

// deviceTools is one session's tools.Provider of the device's MCP tools.
// Its tools are those the device listed in this session; until that list
// has come, those it listed in its last one (the device opens a new
// WebSocket for every conversation, and a turn may start before the list
// arrives), or none.
type deviceTools struct {
	rpc      *mcpClient
	listWait time.Duration
	vision   map[string]string // capabilities.vision; nil: none
	log      zerolog.Logger
	deviceID string
	cache    *toolCache

	// listed is cancelled once this session's listing has ended (with a
	// list or without one): a call made before waits for it.
	listed     context.Context
	markListed context.CancelFunc

	mu      sync.Mutex // guards the fields below
	offered []tools.Tool
	names   map[string]bool // the device's tool names behind offered
	fresh   bool            // offered comes from this session's list
}

func newDeviceTools(rpc *mcpClient, cfg Config, deviceID string, log zerolog.Logger) *deviceTools {
	d := &deviceTools{rpc: rpc, listWait: cfg.MCPListWait, log: log, deviceID: normalizeID(deviceID), cache: cfg.tools}
	if cfg.VisionURL != "" {
		d.vision = map[string]string{"url": cfg.VisionURL, "token": cfg.VisionToken}
	}
	d.listed, d.markListed = context.WithCancel(context.Background())
	if cached := d.cache.get(d.deviceID); cached != nil {
		d.set(cached, false)
	}
	return d
}

// Tools returns the tools known now; it does not block.
func (d *deviceTools) Tools() []tools.Tool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.offered
}

// set replaces the tools offered with those of list.
func (d *deviceTools) set(list []mcpTool, fresh bool) {
	var offered []tools.Tool
	names := map[string]bool{}
	for _, t := range list {
		names[t.Name] = true
	}
	rename := modelNames(names)
	for _, t := range list {
		offered = append(offered, &deviceTool{d: d, spec: llm.Tool{Name: t.Name, Description: rename.Replace(t.Description), Parameters: t.InputSchema}})
	}
	if names[toolDeviceStatus] && names[toolSetVolume] && !names[toolAdjustVolume] {
		offered = append(offered, &adjustVolume{d: d})
	}
	d.mu.Lock()
	d.offered, d.names, d.fresh = offered, names, fresh
	d.mu.Unlock()
}

// modelNames rewrites the device's tool names in its descriptions to the
// names the model sees: set_volume's says "call `self.get_device_status`
// first", a name no tools.Set offers.
func modelNames(names map[string]bool) *strings.Replacer {
	var sorted []string
	for n := range names {
		if tools.ModelName(n) != n {
			sorted = append(sorted, n)
		}
	}
	// Longest first: a name that holds another is replaced whole.
	slices.SortFunc(sorted, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	pairs := make([]string, 0, 2*len(sorted))
	for _, n := range sorted {
		pairs = append(pairs, n, tools.ModelName(n))
	}
	return strings.NewReplacer(pairs...)
}

// discover initializes the device's MCP server and lists its tools, all
// pages; it runs once per session, on a goroutine of its own.
func (d *deviceTools) discover(ctx context.Context) {
	defer d.markListed()
	start := time.Now()
	init := map[string]any{
		"protocolVersion": mcpProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]string{"name": "voxpipe", "version": "1"},
	}
	if d.vision != nil {
		init["capabilities"] = map[string]any{"vision": d.vision}
	}
	res, err := d.rpc.request(ctx, "initialize", init)
	if err != nil {
		d.fail(err, "device mcp initialize failed: no device tools this session")
		return
	}
	var info struct {
		ProtocolVersion string `json:"protocolVersion"`
		ServerInfo      struct {
			Name, Version string
		} `json:"serverInfo"`
	}
	_ = json.Unmarshal(res, &info) // for the log only
	if err := d.rpc.notify(ctx, "notifications/initialized"); err != nil {
		return
	}
	list, pages, err := d.list(ctx)
	if err != nil && len(list) == 0 {
		d.fail(err, "device mcp tools/list failed: no device tools this session")
		return
	}
	if err != nil {
		d.log.Warn().Err(err).Int("tools", len(list)).Msg("device mcp tools/list failed part way: offering the tools listed before")
	}
	d.set(list, true)
	d.cache.put(d.deviceID, list)
	names := make([]string, len(list))
	for i, t := range list {
		names[i] = t.Name
	}
	d.log.Info().Str("board", info.ServerInfo.Name).Str("firmware", info.ServerInfo.Version).
		Str("mcp_version", info.ProtocolVersion).Int("pages", pages).Strs("tools", names).
		Dur("took", time.Since(start)).Msg("device tools listed")
}

// fail ends a failed discovery: the tools of the device's last session
// are taken back (a device whose MCP server does not answer now would
// only make each of their calls wait out its timeout). A device that left
// meanwhile is no news.
func (d *deviceTools) fail(err error, msg string) {
	if errors.Is(err, tools.ErrUnavailable) || errors.Is(err, context.Canceled) {
		d.log.Debug().Err(err).Msg(msg)
		return
	}
	d.set(nil, true)
	d.log.Warn().Err(err).Msg(msg)
}

// list pages through tools/list. It returns what it has on an error.
func (d *deviceTools) list(ctx context.Context) ([]mcpTool, int, error) {
	var list []mcpTool
	seen := map[string]bool{}
	cursor := ""
	for page := 1; ; page++ {
		if page > maxListPages {
			return list, page - 1, fmt.Errorf("tools/list: more than %d pages", maxListPages)
		}
		// withUserTools stays false: the firmware's user-only tools
		// (reboot, firmware upgrade, screen snapshot) are for a person
		// in a companion app, not for a model to call.
		res, err := d.rpc.request(ctx, "tools/list", map[string]any{"cursor": cursor, "withUserTools": false})
		if err != nil {
			return list, page, err
		}
		var r struct {
			Tools      []mcpTool `json:"tools"`
			NextCursor string    `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &r); err != nil {
			return list, page, fmt.Errorf("tools/list: page %d: %w", page, err)
		}
		for _, t := range r.Tools {
			if why := d.skip(t, seen); why != "" {
				d.log.Debug().Str("tool", t.Name).Str("why", why).Msg("device tool not offered")
				continue
			}
			seen[t.Name] = true
			list = append(list, t)
		}
		if r.NextCursor == "" {
			return list, page, nil
		}
		if r.NextCursor == cursor {
			return list, page, fmt.Errorf("tools/list: page %d repeats cursor %q", page, cursor)
		}
		cursor = r.NextCursor
	}
}

// skip says why a listed tool is not offered to the model ("" offers it).
func (d *deviceTools) skip(t mcpTool, seen map[string]bool) string {
	switch {
	case t.Name == "":
		return "no name"
	case seen[t.Name]:
		return "listed twice"
	case t.Annotations != nil && len(t.Annotations.Audience) > 0 && !slices.Contains(t.Annotations.Audience, "assistant"):
		return "meant for the user only"
	case t.Name == toolTakePhoto && d.vision == nil:
		return "no vision_url: the device could not explain its photo"
	}
	if len(t.InputSchema) > 0 {
		var schema map[string]any
		if json.Unmarshal(t.InputSchema, &schema) != nil {
			return "inputSchema is not a JSON object"
		}
	}
	return ""
}

// call runs one of the device's tools, by its own name, and returns the
// text of its result. A call made before this session's list has come
// waits for it (at most listWait) and fails when the list no longer has
// the tool.
func (d *deviceTools) call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	if err := d.waitListed(ctx); err != nil {
		return "", err
	}
	d.mu.Lock()
	fresh, has := d.fresh, d.names[name]
	d.mu.Unlock()
	if fresh && !has {
		return "", fmt.Errorf("the device no longer offers %s: %w", name, tools.ErrUnavailable)
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	res, err := d.rpc.request(ctx, "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return "", err
	}
	var r struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			MimeType string `json:"mimeType"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return "", fmt.Errorf("the device's result for %s is not an MCP tool result: %w", name, err)
	}
	var parts []string
	for _, c := range r.Content {
		switch c.Type {
		case "text":
			parts = append(parts, c.Text)
		default: // image, audio, resource: nothing a voice answer can use
			parts = append(parts, fmt.Sprintf("[%s content, not shown]", c.Type))
		}
	}
	text := strings.Join(parts, "\n")
	if r.IsError {
		if text == "" {
			text = "no detail given"
		}
		return "", fmt.Errorf("the device reported an error from %s: %s", name, text)
	}
	return text, nil
}

func (d *deviceTools) waitListed(ctx context.Context) error {
	if d.listed.Err() != nil {
		return nil
	}
	t := time.NewTimer(d.listWait)
	defer t.Stop()
	select {
	case <-d.listed.Done():
	case <-t.C: // call with the tools of the last session
	case <-ctx.Done():
		return ctx.Err()
	case <-d.rpc.gone.Done():
		return errDeviceGone
	}
	return nil
}

// deviceTool is one of the device's tools.
type deviceTool struct {
	d    *deviceTools
	spec llm.Tool // Name is the device's; the tools.Set offers it as tools.ModelName(Name)
}

func (t *deviceTool) Spec() llm.Tool { return t.spec }

func (t *deviceTool) Call(ctx context.Context, c tools.Call) (string, error) {
	return t.d.call(ctx, t.spec.Name, c.Arguments)
}

// adjustVolume changes the speaker's volume by a step: it reads the
// volume from self.get_device_status (audio_speaker.volume) and sets the
// sum, clamped to 0..100, with self.audio_speaker.set_volume.
type adjustVolume struct{ d *deviceTools }

var adjustVolumeSchema = json.RawMessage(`{"type":"object","properties":{"step":{"type":"integer","minimum":-100,"maximum":100,` +
	`"description":"Percentage points to add to the volume: positive is louder, negative is quieter (10 for a step up, -10 for a step down)."}},"required":["step"]}`)

func (a *adjustVolume) Spec() llm.Tool {
	return llm.Tool{
		Name: toolAdjustVolume,
		Description: "Turn the speaker's volume up or down by a step (\"louder\", \"turn it down a bit\"): " +
			"step +10 for up, -10 for down. For an exact level (\"volume to 30 percent\") use " +
			tools.ModelName(toolSetVolume) + " instead.",
		Parameters: adjustVolumeSchema,
	}
}

func (a *adjustVolume) Call(ctx context.Context, c tools.Call) (string, error) {
	var args struct {
		Step *float64 `json:"step"`
	}
	if err := json.Unmarshal(c.Arguments, &args); err != nil || args.Step == nil {
		return "", errors.New(`adjust_volume needs {"step": integer}`)
	}
	status, err := a.d.call(ctx, toolDeviceStatus, nil)
	if err != nil {
		return "", err
	}
	cur, err := speakerVolume(status)
	if err != nil {
		return "", err
	}
	next := clampVolume(cur + int(math.Round(*args.Step)))
	if next != cur {
		set, _ := json.Marshal(map[string]int{"volume": next})
		if _, err := a.d.call(ctx, toolSetVolume, set); err != nil {
			return "", err
		}
	}
	out, _ := json.Marshal(map[string]int{"previous": cur, "volume": next})
	return string(out), nil
}

// speakerVolume reads audio_speaker.volume from get_device_status's text
// (a JSON object, wifi_board.cc GetDeviceStatusJson).
func speakerVolume(status string) (int, error) {
	var s struct {
		AudioSpeaker struct {
			Volume *float64 `json:"volume"`
		} `json:"audio_speaker"`
	}
	if err := json.Unmarshal([]byte(status), &s); err != nil {
		return 0, fmt.Errorf("the device status is not JSON: %w", err)
	}
	if s.AudioSpeaker.Volume == nil {
		return 0, errors.New("the device status has no audio_speaker.volume")
	}
	return clampVolume(int(math.Round(*s.AudioSpeaker.Volume))), nil
}

func clampVolume(v int) int { return min(100, max(0, v)) }

// toolCache remembers the tool lists of the last devices seen, by device
// id, so that a device's next session offers its tools from the start.
type toolCache struct {
	mu    sync.Mutex // guards the fields below
	max   int
	lists map[string][]mcpTool
	order []string // lists' keys, least recently stored first
}

func newToolCache(max int) *toolCache {
	return &toolCache{max: max, lists: map[string][]mcpTool{}}
}

func (c *toolCache) get(device string) []mcpTool {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists[device]
}

func (c *toolCache) put(device string, list []mcpTool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.Index(c.order, device); i >= 0 {
		c.order = slices.Delete(c.order, i, i+1)
	}
	for len(c.order) >= c.max {
		delete(c.lists, c.order[0])
		c.order = c.order[1:]
	}
	c.lists[device] = list
	c.order = append(c.order, device)
}
