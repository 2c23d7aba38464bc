package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
)

// configFlags are the flags every component takes about its configuration file.
type configFlags struct {
	file  string
	print bool
}

func bindConfigFlags(f *pflag.FlagSet, kind string) *configFlags {
	c := &configFlags{}
	f.StringVar(&c.file, "config", "", "the "+kind+" file (apiVersion "+configv1alpha1.SchemeGroupVersion.String()+`, docs/configuration.md); flags given override it`)
	f.BoolVar(&c.print, "print-config", false, "print the effective configuration (the file, the flags given, the defaults) as YAML, and exit")
	return c
}

// complete loads the file (if any) into c, lets the flags given override it, defaults and
// validates it, and prints it when --print-config asks: done is then true.
func complete[T config.Object](cf *configFlags, c T, overrides func(T), setDefaults func(T), validate func(T) field.ErrorList, out io.Writer) (done bool, err error) {
	if cf.file != "" {
		if err := config.LoadFile(cf.file, c); err != nil {
			return false, err
		}
	}
	overrides(c)
	setDefaults(c)
	if errs := validate(c); len(errs) > 0 {
		where := "the flags"
		if cf.file != "" {
			where = cf.file + " and the flags"
		}
		return false, fmt.Errorf("the configuration (%s): %w", where, errs.ToAggregate())
	}
	if !cf.print {
		return false, nil
	}
	b, err := config.Marshal(c)
	if err != nil {
		return false, err
	}
	_, err = out.Write(b)
	return true, err
}

// overrides binds flags that, where given on the command line, override the configuration:
// each flag's setter writes its value into the configuration C (pflag's Changed).
type overrides[C any] struct {
	fs  *pflag.FlagSet
	set map[string]func(*C)
}

func newOverrides[C any](fs *pflag.FlagSet) *overrides[C] {
	return &overrides[C]{fs: fs, set: map[string]func(*C){}}
}

// apply writes the flags given into c.
func (o *overrides[C]) apply(c *C) {
	o.fs.Visit(func(f *pflag.Flag) {
		if set, ok := o.set[f.Name]; ok {
			set(c)
		}
	})
}

func (o *overrides[C]) String(name, def, usage string, to func(*C, string)) {
	p := o.fs.String(name, def, usage)
	o.set[name] = func(c *C) { to(c, *p) }
}

func (o *overrides[C]) StringSlice(name string, def []string, usage string, to func(*C, []string)) {
	p := o.fs.StringSlice(name, def, usage)
	o.set[name] = func(c *C) { to(c, *p) }
}

func (o *overrides[C]) Bool(name string, def bool, usage string, to func(*C, bool)) {
	p := o.fs.Bool(name, def, usage)
	o.set[name] = func(c *C) { to(c, *p) }
}

func (o *overrides[C]) Int32(name string, def int32, usage string, to func(*C, int32)) {
	p := o.fs.Int32(name, def, usage)
	o.set[name] = func(c *C) { to(c, *p) }
}

func (o *overrides[C]) Int64(name string, def int64, usage string, to func(*C, int64)) {
	p := o.fs.Int64(name, def, usage)
	o.set[name] = func(c *C) { to(c, *p) }
}

func (o *overrides[C]) Float64(name string, def float64, usage string, to func(*C, float64)) {
	p := o.fs.Float64(name, def, usage)
	o.set[name] = func(c *C) { to(c, *p) }
}

func (o *overrides[C]) Float32(name string, def float32, usage string, to func(*C, float32)) {
	p := o.fs.Float32(name, def, usage)
	o.set[name] = func(c *C) { to(c, *p) }
}

func (o *overrides[C]) Duration(name string, def time.Duration, usage string, to func(*C, time.Duration)) {
	p := o.fs.Duration(name, def, usage)
	o.set[name] = func(c *C) { to(c, *p) }
}

// deprecate hides a flag kept for one release, warning whoever gives it which configuration
// field replaces it.
func (o *overrides[C]) deprecate(name, field string) {
	if err := o.fs.MarkDeprecated(name, "set "+field+" in the --config file instead (docs/configuration.md); the flag goes in the next release"); err != nil {
		panic(err) // the flag was bound just above
	}
}

// The flags keep the spelling they had before the configuration: "0" is no address, a
// negative bound is none, and 0 is the default. These turn them into the configuration's.

// address: "0" (or "") serves nothing.
func address(v string) *string {
	if v == "0" {
		v = ""
	}
	return &v
}

// orDefault: 0 asks for the default.
func orDefault[T int32 | int64 | float32 | float64](v T) *T {
	if v == 0 {
		return nil
	}
	return &v
}

// bound: negative is none (the configuration's 0), 0 the default.
func bound[T int32 | int64 | float64](v T) *T {
	if v < 0 {
		var none T
		return &none
	}
	return orDefault(v)
}

// period: 0 asks for the default.
func period(d time.Duration) *metav1.Duration {
	if d == 0 {
		return nil
	}
	return &metav1.Duration{Duration: d}
}

// periodOrNone: negative is none (the configuration's 0), 0 the default.
func periodOrNone(d time.Duration) *metav1.Duration {
	if d < 0 {
		return &metav1.Duration{}
	}
	return period(d)
}
