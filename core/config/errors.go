package config

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors callers may test with errors.Is. All are permanent: the
// same input fails the same way until it is edited.
var (
	ErrUnknownKind    = errors.New("unknown kind")
	ErrUnknownVersion = errors.New("unsupported apiVersion")
	ErrInvalid        = errors.New("invalid resource")
	ErrParse          = errors.New("cannot parse")
)

func unknownKindError(apiVersion, kind string) error {
	if kind == "" {
		return fmt.Errorf("%w: document has no kind", ErrUnknownKind)
	}
	return fmt.Errorf("%w %q (apiVersion %q); known kinds: %s", ErrUnknownKind, kind, apiVersion, kindList())
}

func unknownVersionError(s *Schema, apiVersion string) error {
	accepted := make([]string, len(s.Versions))
	for i, v := range s.Versions {
		accepted[i] = s.Group + "/" + v
	}
	return fmt.Errorf("%w %q for kind %s; accepted: %s", ErrUnknownVersion, apiVersion, s.Kind, strings.Join(accepted, ", "))
}

func kindList() string {
	ks := Kinds()
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// FieldError is one validation failure, naming the field by its path in
// the spec ("spec.ports[0].number").
type FieldError struct {
	Field  string
	Reason string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Reason }

// Errors collects validation failures. The zero value holds none.
type Errors []FieldError

// Add records a failure of field.
func (e *Errors) Add(field, format string, args ...any) {
	*e = append(*e, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

// Err returns nil when there are no failures, else one error wrapping
// ErrInvalid that lists them all; FieldErrors gives them back.
func (e Errors) Err() error {
	if len(e) == 0 {
		return nil
	}
	return &fieldsError{fields: e}
}

type fieldsError struct{ fields Errors }

func (e *fieldsError) Error() string {
	parts := make([]string, len(e.fields))
	for i, fe := range e.fields {
		parts[i] = fe.Error()
	}
	return ErrInvalid.Error() + ": " + strings.Join(parts, "; ")
}

func (e *fieldsError) Unwrap() error { return ErrInvalid }

// FieldErrors returns the field failures an error from Errors.Err
// carries (wrapped or not), so a reader can locate each field in its
// input; nil for any other error.
func FieldErrors(err error) Errors {
	var fe *fieldsError
	if errors.As(err, &fe) {
		return fe.fields
	}
	return nil
}

// DocError is a failure of one document, located by file and line and,
// when the document got that far, its kind/namespace/name. It prints as
// "file:line: kind/ns/name: reason", the form baremeshctl validate and the
// logs use.
type DocError struct {
	File string
	Line int
	// Resource is "Kind/namespace/name" when known.
	Resource string
	Err      error
}

func (e *DocError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Resource != "" {
		b.WriteString(": ")
		b.WriteString(e.Resource)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *DocError) Unwrap() error { return e.Err }
