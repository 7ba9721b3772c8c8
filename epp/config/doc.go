// Package config loads llm-d EndpointPickerConfig YAML and assembles an
// epp.Router from it, following ../../shared/spec/epp.md §1 (llm-d-router
// ebab687, pkg/epp/config/loader and pkg/epp/datalayer/data_graph.go).
//
// The pipeline of Load mirrors upstream, step for step:
//
//  1. Strict decoding (§1.1): unknown fields, duplicate keys and type
//     mismatches are errors that name the file, the line and the field. Both
//     apiVersions are accepted; the deprecated
//     inference.networking.x-k8s.io/v1alpha1 adds a warning. The deprecated
//     top-level saturationDetector and parser are moved to
//     flowControl.saturationDetector and requestHandler.parsers (warning).
//  2. Static defaults (§1.3 step 1): name = type; feature gates validated.
//  3. Plugin validation and instantiation (§1.3 step 2, §1.5): missing type,
//     duplicate name, unregistered type; plugins are built through the
//     epp.Registry in a topological order of plugin-to-plugin references
//     (ties in config order). Parameters stay raw JSON; each factory decodes
//     them strictly.
//  4. System defaults (§1.3 step 3): scheduling layer, flow-control policies,
//     parsers, saturation detector, data layer.
//  5. Validation (§1.5) and the scheduler build (§1.3 step 5).
//  6. CreateMissingDataProducers (§1.3 step 6) and the producer execution
//     order (§1.3 step 7).
//
// Where upstream iterates a Go map (the auto-created default profile, the
// default picker, missing data keys, producer ties, hook registration) eppsim
// uses configuration order, then creation order; docs/epp.md lists every
// such convention. The package holds no global mutable state.
package config
