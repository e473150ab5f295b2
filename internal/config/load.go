package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Load returns Default() overlaid with the YAML file at path. It does not
// validate: apply overrides with Set, then call Validate.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, path)
}

// Parse is Load for a YAML document already in memory; name is used in
// error messages (usually the file's path).
func Parse(data []byte, name string) (*Config, error) {
	cfg := Default()
	cfg.origins = map[string]string{}

	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, newProblem(ErrInvalid, "%s: %s", name, trimYAMLError(err.Error()))
	}
	if len(root.Content) == 0 { // empty file: defaults only
		return &cfg, nil
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return nil, newProblem(ErrInvalid, "%s: line %d: the top level must be a mapping of sections", name, doc.Line)
	}
	// Walk the node tree first: it names the section of an unknown key and
	// remembers the line of every key for later messages.
	lines := map[int]string{}
	var unknown []error
	walkKnown(doc, reflect.TypeOf(cfg), "", name, cfg.origins, lines, &unknown)
	if len(unknown) > 0 {
		return nil, errors.Join(unknown...)
	}

	// The strict decoder stays as the authority on types and unknown keys.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, decodeError(err, name, lines)
	}
	return &cfg, nil
}

// walkKnown checks every key of node against the yaml tags of t (a struct)
// and records key → "file: line N" in origins and line → key in lines.
func walkKnown(node *yaml.Node, t reflect.Type, prefix, file string, origins map[string]string, lines map[int]string, errs *[]error) {
	if node.Kind != yaml.MappingNode || t.Kind() != reflect.Struct {
		return // a type mismatch: the decoder reports it with its line
	}
	fields := yamlFields(t)
	for i := 0; i+1 < len(node.Content); i += 2 {
		keyNode, valNode := node.Content[i], node.Content[i+1]
		key := joinKey(prefix, keyNode.Value)
		ft, ok := fields[keyNode.Value]
		if !ok {
			section := prefix
			if section == "" {
				section = "top level"
			}
			*errs = append(*errs, newProblem(ErrUnknownField, "%s: line %d: field %q not found in %q (known: %s)",
				file, keyNode.Line, keyNode.Value, section, strings.Join(sortedKeys(fields), ", ")))
			continue
		}
		origins[key] = fmt.Sprintf("%s: line %d", file, keyNode.Line)
		lines[keyNode.Line] = key
		if valNode.Line != keyNode.Line {
			lines[valNode.Line] = key
		}
		if ft.Kind() == reflect.Struct && !isScalarType(ft) {
			walkKnown(valNode, ft, key, file, origins, lines, errs)
		}
	}
}

func isScalarType(t reflect.Type) bool {
	return t.PkgPath() == "time" // time.Duration is an int64; time.Time would be a struct
}

// yamlFields maps each yaml key of struct type t to its field type.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = f.Type
	}
	return fields
}

func sortedKeys(m map[string]reflect.Type) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

var yamlLineRE = regexp.MustCompile(`^line (\d+): (.*)$`)

// decodeError rewrites yaml.v3's "yaml: unmarshal errors:\n  line 3: ..."
// into one line per problem naming the file and the key.
func decodeError(err error, file string, lines map[int]string) error {
	var typeErr *yaml.TypeError
	if !errors.As(err, &typeErr) {
		return newProblem(ErrInvalid, "%s: %s", file, trimYAMLError(err.Error()))
	}
	errs := make([]error, 0, len(typeErr.Errors))
	for _, msg := range typeErr.Errors {
		m := yamlLineRE.FindStringSubmatch(msg)
		if m == nil {
			errs = append(errs, newProblem(ErrInvalid, "%s: %s", file, msg))
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if key, ok := lines[n]; ok {
			errs = append(errs, newProblem(ErrInvalid, "%s: line %d: %s: %s", file, n, key, m[2]))
		} else {
			errs = append(errs, newProblem(ErrInvalid, "%s: line %d: %s", file, n, m[2]))
		}
	}
	return errors.Join(errs...)
}

func trimYAMLError(msg string) string {
	return strings.TrimPrefix(msg, "yaml: ")
}

// Set overrides one setting by its dotted key ("server.addr",
// "pipeline.vad.end_silence_ms"); value is parsed as YAML into the field's
// type. source says where it came from in later errors ("flag --addr").
func (c *Config) Set(key, value, source string) error {
	v := reflect.ValueOf(c).Elem()
	parent := "the top level"
	for _, part := range strings.Split(key, ".") {
		if v.Kind() != reflect.Struct || isScalarType(v.Type()) {
			return newProblem(ErrNoKey, "%s: no setting %q", source, key)
		}
		fields := yamlFields(v.Type())
		if _, ok := fields[part]; !ok {
			return newProblem(ErrNoKey, "%s: no setting %q (%s has: %s)", source, key, parent, strings.Join(sortedKeys(fields), ", "))
		}
		v = fieldByTag(v, part)
		if parent == "the top level" {
			parent = part
		} else {
			parent += "." + part
		}
	}
	if v.Kind() == reflect.Struct && !isScalarType(v.Type()) {
		return newProblem(ErrNoKey, "%s: %q is a section, not a setting", source, key)
	}
	fresh := reflect.New(v.Type())
	if err := yaml.Unmarshal([]byte(value), fresh.Interface()); err != nil {
		return newProblem(ErrInvalid, "%s: %s: %s", source, key, trimYAMLError(err.Error()))
	}
	v.Set(fresh.Elem())
	if c.origins == nil {
		c.origins = map[string]string{}
	}
	c.origins[key] = source
	return nil
}

func fieldByTag(v reflect.Value, tag string) reflect.Value {
	t := v.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == tag {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}

// Origin says where the value of key came from: "configs/x.yaml: line 12",
// "flag --addr" or "default".
func (c *Config) Origin(key string) string {
	if o, ok := c.origins[key]; ok {
		return o
	}
	return "default"
}
