package main

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/execstore/execstore"
	"go.yaml.in/yaml/v4"
)

// The contract is openapi.yaml at the repository root (execstore.OpenAPI);
// the server converts it to JSON once, when it starts, and answers it at
// GET /v1/openapi.json.

// openAPIHandler answers the document, converted once.
func openAPIHandler() http.HandlerFunc {
	doc, err := openAPIJSON(execstore.OpenAPI())
	if err != nil {
		panic("execstore: the embedded OpenAPI document does not convert to JSON: " + err.Error())
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(doc)
	}
}

// openAPIJSON converts a YAML document to JSON.
func openAPIJSON(doc []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	return json.Marshal(jsonable(v))
}

// jsonable turns what YAML decodes into what JSON encodes: mappings with
// keys that are not strings (a status code written 200) get string keys.
func jsonable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonable(e)
		}
		return v
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprint(k)] = jsonable(e)
		}
		return out
	case []any:
		for i, e := range v {
			v[i] = jsonable(e)
		}
		return v
	}
	return v
}
