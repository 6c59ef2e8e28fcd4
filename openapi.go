package execstore

import (
	"bytes"
	_ "embed" // the HTTP API's contract
)

//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPI returns the contract of the HTTP API that `execstore serve`
// (cmd/execstore) serves: an OpenAPI 3.1 document, in YAML. The server
// answers it as JSON at GET /v1/openapi.json, and its tests validate every
// answer they get against it.
func OpenAPI() []byte { return bytes.Clone(openAPIYAML) }
