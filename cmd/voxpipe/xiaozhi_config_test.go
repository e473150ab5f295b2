package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/web/xiaozhi"
)

// TestXiaozhiConfigMapped: the default server.xiaozhi section with tools
// on gives the transport's own defaults; with tools off no device tools are
// asked for; each device-tools key reaches its field.
func TestXiaozhiConfigMapped(t *testing.T) {
	c := config.Default()
	got, want := xiaozhiConfig(c.Server.Xiaozhi, true), xiaozhi.DefaultConfig()
	if len(got.AllowedDevices) == 0 {
		got.AllowedDevices = nil // the YAML's [] is the Go default's nil
	}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("default server.xiaozhi maps to\n%+v\nwant xiaozhi.DefaultConfig()\n%+v", *got, want)
	}
	if xiaozhiConfig(c.Server.Xiaozhi, false).DeviceTools {
		t.Error("device tools on with tools.enabled off")
	}
	for key, value := range map[string]string{
		"server.xiaozhi.device_tools":  "false",
		"server.xiaozhi.mcp_timeout":   "750ms",
		"server.xiaozhi.mcp_list_wait": "0s",
		"server.xiaozhi.vision_url":    "http://cam.example/vision",
		"server.xiaozhi.vision_token":  "v-token",
	} {
		if err := c.Set(key, value, "test"); err != nil {
			t.Fatalf("%s=%s: %v", key, value, err)
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	xc := xiaozhiConfig(c.Server.Xiaozhi, true)
	if xc.DeviceTools || xc.MCPTimeout != 750*time.Millisecond || xc.MCPListWait != 0 ||
		xc.VisionURL != "http://cam.example/vision" || xc.VisionToken != "v-token" {
		t.Errorf("mapped device tools: on %v, timeout %v, list wait %v, vision %q %q",
			xc.DeviceTools, xc.MCPTimeout, xc.MCPListWait, xc.VisionURL, xc.VisionToken)
	}
}
