package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// EnvName is the environment variable of a flag: CAIRN_ and the flag's
// name upper-cased, dashes turned into underscores (CAIRN_NATS_URL for
// -nats-url).
func EnvName(flagName string) string {
	return "CAIRN_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse parses args into fs after applying the CAIRN_<NAME> environment
// variables (EnvName); a flag on the command line wins.
//
// Flags may come anywhere among the positional arguments
// (`poison list -data d orders` is `poison -data d list orders`); "--"
// ends the flags, and what follows it is positional even if it starts
// with a dash. -h, -help and --help anywhere before "--", or "help" as
// the first positional argument, print fs.Usage on standard output and
// return flag.ErrHelp (the caller exits 0): a help request is never taken
// for a name. An unknown flag is an error, wherever it is. The cost is one
// pass over args.
func Parse(fs *flag.FlagSet, args []string) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := EnvName(f.Name)
		if v, ok := os.LookupEnv(name); ok && err == nil {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("environment %s=%q: %v", name, v, e)
			}
		}
	})
	if err != nil {
		return err
	}
	flags, positional, help := Interleave(fs, args)
	if help || (len(positional) > 0 && positional[0] == "help") {
		return Help(fs)
	}
	fs.SetOutput(io.Discard) // Parse's errors are returned, not printed with the usage
	defer fs.SetOutput(nil)
	// The flags alone first, so that a last flag without its value is
	// refused rather than given "--"; then the positional arguments
	// after "--", which only sets fs.Args.
	if err := fs.Parse(flags); err != nil {
		return fmt.Errorf("%s: %w (-h for the flags)", fs.Name(), err)
	}
	return fs.Parse(append([]string{"--"}, positional...))
}

// Help prints fs's usage on standard output and returns flag.ErrHelp.
func Help(fs *flag.FlagSet) error {
	fs.SetOutput(os.Stdout)
	defer fs.SetOutput(nil)
	fs.Usage()
	return flag.ErrHelp
}

// Interleave splits args into the flags (each with its value, in order)
// and the positional arguments, wherever the flags appear; help reports a
// -h, -help or --help before "--". A flag that takes a value and is
// written without "=" takes the next argument as its value, as the flag
// package does; a boolean flag never does. An unknown flag is kept among
// the flags, for fs.Parse to refuse.
func Interleave(fs *flag.FlagSet, args []string) (flags, positional []string, help bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		name, _, hasValue := strings.Cut(name, "=")
		if (name == "h" || name == "help") && fs.Lookup(name) == nil {
			help = true
			continue
		}
		flags = append(flags, a)
		f := fs.Lookup(name)
		if f == nil || hasValue || isBool(f) {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return flags, positional, help
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// hidden wraps the value of a flag that help does not show.
type hidden struct{ flag.Value }

func (h hidden) IsBoolFlag() bool {
	b, ok := h.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Hide keeps the named flag of fs out of PrintFlags (it is still parsed
// and still read from its environment variable): for flags only tests
// use. It panics on a name fs does not define, a programming error.
func Hide(fs *flag.FlagSet, name string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("cli.Hide: no flag " + name)
	}
	f.Value = hidden{f.Value}
}

// IsHidden reports whether Hide was called for the flag.
func IsHidden(f *flag.Flag) bool {
	_, ok := f.Value.(hidden)
	return ok
}

// PrintFlags writes fs's flags, sorted, each with its type, usage,
// default and environment variable, leaving out the hidden ones.
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	var all []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !IsHidden(f) {
			all = append(all, f)
		}
	})
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	for _, f := range all {
		typ, usage := flag.UnquoteUsage(f)
		line := "  -" + f.Name
		if typ != "" {
			line += " " + typ
		}
		fmt.Fprintln(w, line)
		usage = strings.ReplaceAll(usage, "\n", "\n    \t")
		if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "0s" && !strings.Contains(usage, "(default") {
			if typ == "string" {
				def = fmt.Sprintf("%q", def)
			}
			usage += " (default " + def + ")"
		}
		fmt.Fprintf(w, "    \t%s\n    \t[%s]\n", usage, EnvName(f.Name))
	}
}

// Usage sets fs.Usage to print text (the synopsis and what the command
// does, ending with a blank line) and then the flags (PrintFlags).
func Usage(fs *flag.FlagSet, text string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprint(w, text)
		if hasFlags(fs) {
			fmt.Fprintln(w, "Flags (each also CAIRN_<NAME>, the command line winning):")
			PrintFlags(w, fs)
		}
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		if !IsHidden(f) {
			n++
		}
	})
	return n > 0
}
