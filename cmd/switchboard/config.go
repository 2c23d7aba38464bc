package main

import (
	"fmt"
	"reflect"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
)

// configFlags are a command's flags bound into its configuration T, as cert-manager's
// AddConfigFlags binds them: each flag's storage is a field of bound, a configuration defaulted
// as the command would run it, so that the flag's default is the configuration's. The effective
// configuration is then the file (--config), the flags given on the command line over it, and
// the defaults where neither says (complete).
type configFlags[T config.Object] struct {
	fs    *pflag.FlagSet
	bound T
	// systemNamespace, when set, selects the configuration's system namespace, which then
	// defaults to the pod's ($POD_NAMESPACE).
	systemNamespace func(T) *string
	file            string
	print           bool
	// carry writes each flag's field of bound into the effective configuration, where the
	// flag was given, and returns that field: its old spelling, if it has one, is read there.
	carry map[string]func(to T) any
	old   map[string]oldForm
}

// newConfigFlags binds --config and --print-config to fs, and returns what binds the
// component's own flags into bound, which prepare gives its optional sections (so that flags
// have fields to bind to) before it is defaulted.
func newConfigFlags[T config.Object](fs *pflag.FlagSet, prepare func(T), systemNamespace func(T) *string) *configFlags[T] {
	f := &configFlags[T]{fs: fs, bound: config.New[T](), systemNamespace: systemNamespace, carry: map[string]func(T) any{}, old: map[string]oldForm{}}
	fs.StringVar(&f.file, "config", "", "the "+config.Kind(f.bound)+" file (apiVersion "+configv1alpha1.SchemeGroupVersion.String()+`, docs/configuration.md); flags given override it`)
	fs.BoolVar(&f.print, "print-config", false, "print the effective configuration (the file, the flags given, the defaults) as YAML, and exit")
	if prepare != nil {
		prepare(f.bound)
	}
	f.defaultNamespace(f.bound)
	config.Default(f.bound)
	return f
}

// defaultNamespace gives c's system namespace, if it has one and it is unset, the pod's.
func (f *configFlags[T]) defaultNamespace(c T) {
	if f.systemNamespace != nil && *f.systemNamespace(c) == "" {
		*f.systemNamespace(c) = podNamespace()
	}
}

// value binds the flag name to the field of T that field selects (a string, bool or list),
// with old, if given, the form its value had before it spelt the configuration's.
func value[T config.Object, V any](f *configFlags[T], name, usage string, field func(T) *V, old ...oldForm) {
	p := field(f.bound)
	bindVar(f.fs, p, name, usage)
	f.bind(name, func(to T) any { *field(to) = *p; return field(to) }, old)
}

// optional binds the flag name to the optional field of T that field selects (a pointer,
// which bound has defaulted), with old as value's.
func optional[T config.Object, V any](f *configFlags[T], name, usage string, field func(T) **V, old ...oldForm) {
	p := *field(f.bound)
	bindVar(f.fs, p, name, usage)
	f.bind(name, func(to T) any { v := *p; *field(to) = &v; return field(to) }, old)
}

func (f *configFlags[T]) bind(name string, carry func(T) any, old []oldForm) {
	f.carry[name] = carry
	if len(old) > 0 {
		f.old[name] = old[0]
	}
}

// bindVar binds name to p, its default p's value.
func bindVar(fs *pflag.FlagSet, p any, name, usage string) {
	switch p := p.(type) {
	case *string:
		fs.StringVar(p, name, *p, usage)
	case *bool:
		fs.BoolVar(p, name, *p, usage)
	case *[]string:
		fs.StringSliceVar(p, name, *p, usage)
	case *int32:
		fs.Int32Var(p, name, *p, usage)
	case *int64:
		fs.Int64Var(p, name, *p, usage)
	case *float32:
		fs.Float32Var(p, name, *p, usage)
	case *float64:
		fs.Float64Var(p, name, *p, usage)
	case *metav1.Duration:
		fs.DurationVar(&p.Duration, name, p.Duration, usage)
	default:
		panic(fmt.Sprintf("--%s: no flag of a %T", name, p)) // a field bound above: a bug
	}
}

// deprecate hides a flag kept for one release, warning whoever gives it which configuration
// field replaces it.
func (f *configFlags[T]) deprecate(name, field string) {
	if err := f.fs.MarkDeprecated(name, "set "+field+" in the --config file instead (docs/configuration.md); the flag goes in the next release"); err != nil {
		panic(err) // the flag was bound just above
	}
}

// complete is the effective configuration: the file (if any), the flags given over it, then
// the defaults, validated; with what their old spellings, where given, are to tell.
func (f *configFlags[T]) complete() (c T, warnings []string, err error) {
	c = config.New[T]()
	if f.file != "" {
		if err := config.LoadFile(f.file, c); err != nil {
			return c, nil, err
		}
	}
	f.fs.Visit(func(fl *pflag.Flag) {
		carry, ok := f.carry[fl.Name]
		if !ok {
			return
		}
		p := carry(c)
		if form, ok := f.old[fl.Name]; ok {
			if w := oldSpelling(fl, form, p); w != "" {
				warnings = append(warnings, w)
			}
		}
	})
	f.defaultNamespace(c)
	config.Default(c)
	if errs := config.Validate(c); len(errs) > 0 {
		where := "the flags"
		if f.file != "" {
			where = f.file + " and the flags"
		}
		return c, warnings, fmt.Errorf("the configuration (%s): %w", where, errs.ToAggregate())
	}
	return c, warnings, nil
}

// oldForm is the spelling a flag's value had before the flags spelt the configuration's,
// which keeps working for one release (docs/configuration.md, "Deprecated").
type oldForm int

const (
	// addressZero: "0" served nothing, as "" does now.
	addressZero oldForm = iota + 1
	// negativeNone: a negative bound or period was none, as 0 is now (0 was the default).
	negativeNone
	// zeroDefault: 0 asked for the default (0 is refused now).
	zeroDefault
)

// oldSpelling reads the value of the flag fl, in the effective configuration's field at p, in
// its old form: a value in it is rewritten in the configuration's spelling (an optional field
// unset, for its default), and what to tell the person is returned ("" when the value is in the
// configuration's spelling already). This is the one place the old spellings are read.
func oldSpelling(fl *pflag.Flag, form oldForm, p any) string {
	field := reflect.ValueOf(p).Elem()
	v := field
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	given := "--" + fl.Name + "=" + fl.Value.String()
	switch {
	case form == addressZero && v.String() == "0":
		v.SetString("")
		return fmt.Sprintf(`%s is deprecated: write --%s="" to serve nothing, as a configuration's ""; "0" goes in the next release`, given, fl.Name)
	case form == negativeNone && sign(v) < 0:
		v.SetZero()
		return fmt.Sprintf("%s is deprecated: write --%s=0 for none, as a configuration's 0; a negative value goes in the next release", given, fl.Name)
	case form == negativeNone && sign(v) == 0:
		return fmt.Sprintf("%s means none, as a configuration's 0 (before this release, 0 asked for the default, %s)", given, fl.DefValue)
	case form == zeroDefault && sign(v) == 0:
		field.SetZero()
		return fmt.Sprintf("%s is deprecated: leave the flag out for the default (%s); 0 goes in the next release", given, fl.DefValue)
	}
	return ""
}

// sign is -1, 0 or 1 as the number or duration v is negative, zero or positive.
func sign(v reflect.Value) int {
	var n float64
	switch v.Kind() {
	case reflect.Int32, reflect.Int64:
		n = float64(v.Int())
	case reflect.Float32, reflect.Float64:
		n = v.Float()
	case reflect.Struct: // a metav1.Duration
		n = float64(v.FieldByName("Duration").Int())
	}
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
