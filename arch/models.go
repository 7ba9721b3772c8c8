package arch

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The embedded config.json files, one per model, at models/ORG/NAME.json
// for the Hugging Face id ORG/NAME (see models/README.md).
//
//go:embed models
var modelFS embed.FS

// Models lists the Hugging Face ids of the embedded model configs, sorted.
func Models() []string {
	var ids []string
	_ = fs.WalkDir(modelFS, "models", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(path, "models/"), ".json"))
		}
		return nil
	})
	slices.Sort(ids)
	return ids
}

// LookupModel parses the embedded config of a Hugging Face id (matched
// case-insensitively, as the Hub does).
func LookupModel(id string) (*Model, error) {
	for _, known := range Models() {
		if strings.EqualFold(known, id) {
			data, err := modelFS.ReadFile("models/" + known + ".json")
			if err != nil {
				return nil, err
			}
			return ParseModel(data, known)
		}
	}
	return nil, fmt.Errorf("unknown model %q: not an embedded config (have %s) and no such file", id, strings.Join(Models(), ", "))
}

// ResolveModel finds a model by reference: a config.json file (or a
// directory holding one), relative to dir unless absolute, or else the
// Hugging Face id of an embedded config.
func ResolveModel(ref, dir string) (*Model, error) {
	if ref == "" {
		return nil, fmt.Errorf("model: empty reference")
	}
	path := ref
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	if _, err := os.Stat(path); err == nil {
		return LoadModel(path)
	}
	return LookupModel(ref)
}
