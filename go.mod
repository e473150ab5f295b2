module github.com/voxpipe/voxpipe

go 1.26.0

require (
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/hraban/opus v0.0.0-20260708213942-bde8e4304501 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/rs/zerolog v1.35.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
