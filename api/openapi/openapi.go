// Package openapi embeds the OpenAPI 3.1 document of the /v1 API, which the API server serves
// at /openapi.yaml and its tests check real responses against.
package openapi

import _ "embed"

// Document is api/openapi/openapi.yaml.
//
//go:embed openapi.yaml
var Document []byte
