package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/ferryhq/ferry/fsbus/tty"
	"github.com/ferryhq/ferry/internal/errs"
)

// loadStages name fsbus's Load stages on the progress line.
var loadStages = map[string]string{
	"reading": "reading the channel", "verifying": "checking signatures",
	"folding": "folding the ledger", "arrivals": "recording arrivals",
}

// loadProgress is a Channel.Progress drawing one line on w when w is a terminal, and
// nil (no reports at all) otherwise: piped or redirected output never carries it.
func loadProgress(w io.Writer) func(stage string, done, total int) {
	p := tty.ForTerminal(w, "ferry")
	if p == nil {
		return nil
	}
	return func(stage string, done, total int) {
		if s, ok := loadStages[stage]; ok {
			stage = s
		}
		p.Report(stage, done, total)
	}
}

// CLI conventions: exit codes documented from the one map in cli.go, shell
// completion walked from kong's model, plain output.

// exitMeaning says what each error category means to a script reading the exit code.
// A test checks it names exactly the categories of exitCodes.
var exitMeaning = map[errs.Category]string{
	errs.Internal:    "an unexpected failure (I/O, a bug); details on stderr",
	errs.Invalid:     "bad input or bad usage: nothing was changed",
	errs.Denied:      "the agent's level or scope does not allow it",
	errs.NotFound:    "no such order, agent, key, project or file",
	errs.Conflict:    "someone else got there first (a claim, a name, a lease)",
	errs.Locked:      "a key is locked (passphrase-protected): unlock it first",
	errs.Stale:       "what was acted on changed since it was read: read again, then retry",
	errs.RetryNeeded: "something has not fully arrived or is damaged on this machine (the sync tool is still delivering it): retry later",
	errs.Paused:      "this machine is paused (`ferry pause`): `ferry resume` lifts it",
	errs.Superseded:  "the entry acted on lost a race across machines (its branch is superseded, docs/format.md §14)",
}

// exitRow is one documented exit code.
type exitRow struct {
	Code     int
	Category errs.Category
	Meaning  string
}

// exitRows are 0 and every code of exitCodes, in code order.
func exitRows() []exitRow {
	rows := []exitRow{{0, "ok", "success"}}
	for cat, code := range exitCodes {
		rows = append(rows, exitRow{code, cat, exitMeaning[cat]})
	}
	slices.SortFunc(rows, func(a, b exitRow) int { return cmp.Compare(a.Code, b.Code) })
	return rows
}

// exitCodesLine is the one-line summary `ferry --help` shows.
func exitCodesLine() string {
	var parts []string
	for _, r := range exitRows() {
		parts = append(parts, fmt.Sprintf("%d %s", r.Code, r.Category))
	}
	return "Exit codes: " + strings.Join(parts, ", ") + " (docs/exit-codes.md)."
}

// exitCodesMarkdown renders docs/exit-codes.md (go test ./ferry -run TestExitCodesDoc
// -update).
func exitCodesMarkdown() []byte {
	var b bytes.Buffer
	b.WriteString("# Exit codes and output conventions\n\n")
	b.WriteString("<!-- Generated from exitCodes in ferry/cli.go by `go test ./ferry -run TestExitCodesDoc -update`; do not edit. -->\n\n")
	b.WriteString("Every failure prints `ferry: error: <category>: <message>` and a `ferry: hint:` line on\n")
	b.WriteString("stderr, changes nothing, and exits with the code of its category. Bad usage (an unknown\n")
	b.WriteString("command or flag, a missing argument) is `invalid`. MCP tool failures carry the same\n")
	b.WriteString("categories (docs/mcp.md).\n\n")
	b.WriteString("With `--json`, a failure is instead one line of JSON on stderr, with the same exit code:\n")
	b.WriteString("`{\"error\":{\"category\":\"not_found\",\"message\":\"…\",\"hint\":\"…\"}}` (`hint` is `\"\"` when\n")
	b.WriteString("there is none). A usage error is JSON too when `--json` is among the arguments.\n\n")
	b.WriteString("| code | category | meaning |\n|---:|---|---|\n")
	for _, r := range exitRows() {
		fmt.Fprintf(&b, "| %d | `%s` | %s |\n", r.Code, r.Category, r.Meaning)
	}
	b.WriteString("\n## Output\n\n")
	b.WriteString("- ferry prints plain text: no colour and no terminal escapes, on a terminal or not, so\n")
	b.WriteString("  `NO_COLOR` needs nothing from it. Text that comes from the channel (titles, notes,\n")
	b.WriteString("  names) is shown with control characters escaped (`\\x1b`), never passed through.\n")
	b.WriteString("- `--json` on a read prints JSON on stdout and nothing else there.\n")
	b.WriteString("- A progress line for long work (the first reading of a big channel, generating the big\n")
	b.WriteString("  fixture) goes to stderr, and only when stderr is a terminal; piped or redirected,\n")
	b.WriteString("  there is none.\n\n")
	b.WriteString("## Shell completion\n\n")
	b.WriteString("`ferry completion SHELL` prints a completion script walked from the command tree:\n\n")
	b.WriteString("```\n")
	b.WriteString("$ source <(ferry completion bash)                       # ~/.bashrc\n")
	b.WriteString("$ source <(ferry completion zsh)                        # ~/.zshrc, after compinit\n")
	b.WriteString("$ ferry completion fish > ~/.config/fish/completions/ferry.fish\n")
	b.WriteString("PS> ferry completion powershell | Out-String | Invoke-Expression   # $PROFILE\n")
	b.WriteString("```\n")
	return b.Bytes()
}

// CompletionCmd is `ferry completion bash|zsh|fish|powershell`.
type CompletionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish,powershell" help:"The shell: bash, zsh, fish or powershell."`
}

// Help is the long help.
func (c *CompletionCmd) Help() string {
	return "Prints a script completing ferry's commands, their aliases, flags and the values of\n" +
		"flags with a fixed set (--level, --scope, …); other flag values complete as file names.\n\n" +
		"  bash:        source <(ferry completion bash)                  (in ~/.bashrc)\n" +
		"  zsh:         source <(ferry completion zsh)                   (in ~/.zshrc, after compinit)\n" +
		"  fish:        ferry completion fish > ~/.config/fish/completions/ferry.fish\n" +
		"  PowerShell:  ferry completion powershell | Out-String | Invoke-Expression   (in $PROFILE)"
}

// Run implements the command.
func (c *CompletionCmd) Run(g *Globals, k *kong.Context) error {
	t := completionTable(k.Model)
	switch c.Shell {
	case "bash":
		g.stdout.Write(bashCompletion(t))
	case "zsh":
		g.stdout.Write(zshCompletion(t))
	case "fish":
		g.stdout.Write(fishCompletion(t))
	default:
		g.stdout.Write(powershellCompletion(t))
	}
	return nil
}

// complTable is the command tree flattened for the completion scripts. Paths are a
// command's words without aliases ("" is the program itself).
type complTable struct {
	Paths []string
	// Sub maps "path|word" (a command name or alias) to the child's path.
	Sub map[string]string
	// Words are what may follow at path: subcommands and aliases, the values of an enum
	// positional, and every flag (with its parents').
	Words map[string][]string
	// Values maps "path|--flag" (and "path|-x") of each flag taking a value to its enum
	// values (nil: any value, completed as a file name).
	Values map[string][]string
}

// completionTable walks app's visible commands.
func completionTable(app *kong.Application) *complTable {
	t := &complTable{Sub: map[string]string{}, Words: map[string][]string{}, Values: map[string][]string{}}
	var walk func(n *kong.Node, path string)
	walk = func(n *kong.Node, path string) {
		t.Paths = append(t.Paths, path)
		var words []string
		for _, ch := range n.Children {
			if ch.Hidden || ch.Type != kong.CommandNode {
				continue
			}
			cp := strings.TrimSpace(path + " " + ch.Name)
			for _, name := range append([]string{ch.Name}, ch.Aliases...) {
				t.Sub[path+"|"+name] = cp
				words = append(words, name)
			}
		}
		if len(n.Positional) > 0 && n.Positional[0].Enum != "" {
			words = append(words, n.Positional[0].EnumSlice()...)
		}
		// A default subcommand's flags complete on its parent too: `ferry grant NAME
		// --level` is `ferry grant set NAME --level`.
		flagged := n
		if n.DefaultCmd != nil && !n.DefaultCmd.Hidden {
			flagged = n.DefaultCmd
		}
		for _, group := range flagged.AllFlags(true) {
			for _, f := range group {
				names := []string{"--" + f.Name}
				if f.Short != 0 {
					names = append(names, "-"+string(f.Short))
				}
				words = append(words, names[0])
				if f.IsBool() || f.IsCounter() {
					continue
				}
				var vals []string
				if f.Enum != "" {
					vals = f.EnumSlice()
				}
				for _, nm := range names {
					t.Values[path+"|"+nm] = vals
				}
			}
		}
		t.Words[path] = words
		for _, ch := range n.Children {
			if !ch.Hidden && ch.Type == kong.CommandNode {
				walk(ch, strings.TrimSpace(path+" "+ch.Name))
			}
		}
	}
	walk(app.Node, "")
	return t
}

func sortedSubs(m map[string]string) []string {
	ks := slices.Sorted(maps.Keys(m))
	return ks
}

// sq single-quotes s for sh, fish and PowerShell alike (command and flag names hold no
// quote; one would be doubled for PowerShell and closed-and-reopened for sh).
func sq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

func bashCompletion(t *complTable) []byte {
	var b bytes.Buffer
	b.WriteString("# bash completion for ferry (generated by `ferry completion bash`)\n\n")
	b.WriteString("_ferry_sub() {\n\tcase \"$1|$2\" in\n")
	for _, k := range sortedSubs(t.Sub) {
		fmt.Fprintf(&b, "\t%s) echo %s ;;\n", sq(k), sq(t.Sub[k]))
	}
	b.WriteString("\t*) return 1 ;;\n\tesac\n}\n\n")
	b.WriteString("_ferry_words() {\n\tcase \"$1\" in\n")
	for _, p := range t.Paths {
		fmt.Fprintf(&b, "\t%s) echo %s ;;\n", sq(p), sq(strings.Join(t.Words[p], " ")))
	}
	b.WriteString("\tesac\n}\n\n")
	b.WriteString("# _ferry_values PATH FLAG prints FLAG's fixed values; it fails for a flag taking none.\n")
	b.WriteString("_ferry_values() {\n\tcase \"$1|$2\" in\n")
	for _, k := range slices.Sorted(maps.Keys(t.Values)) {
		fmt.Fprintf(&b, "\t%s) echo %s ;;\n", sq(k), sq(strings.Join(t.Values[k], " ")))
	}
	b.WriteString("\t*) return 1 ;;\n\tesac\n}\n\n")
	b.WriteString(`_ferry() {
	local cur="${COMP_WORDS[COMP_CWORD]}" path="" w n vals i skip=0
	for ((i = 1; i < COMP_CWORD; i++)); do
		w="${COMP_WORDS[i]}"
		if ((skip)); then skip=0; continue; fi
		case "$w" in
		--*=*) continue ;;
		-*) _ferry_values "$path" "$w" >/dev/null && skip=1; continue ;;
		esac
		if n="$(_ferry_sub "$path" "$w")"; then path="$n"; fi
	done
	if ((COMP_CWORD > 1)) && vals="$(_ferry_values "$path" "${COMP_WORDS[COMP_CWORD-1]}")"; then
		if [[ -n "$vals" ]]; then
			COMPREPLY=($(compgen -W "$vals" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi
		return 0
	fi
	COMPREPLY=($(compgen -W "$(_ferry_words "$path")" -- "$cur"))
}
complete -F _ferry ferry
`)
	return b.Bytes()
}

// zshCompletion runs the bash script through zsh's bashcompinit.
func zshCompletion(t *complTable) []byte {
	var b bytes.Buffer
	b.WriteString("#compdef ferry\n# zsh completion for ferry (generated by `ferry completion zsh`): the bash\n")
	b.WriteString("# completion through bashcompinit. Source it after compinit.\n")
	b.WriteString("autoload -U +X bashcompinit && bashcompinit\n\n")
	b.Write(bashCompletion(t))
	return b.Bytes()
}

func fishCompletion(t *complTable) []byte {
	var b bytes.Buffer
	b.WriteString("# fish completion for ferry (generated by `ferry completion fish`)\n\n")
	b.WriteString("function __ferry_sub --argument-names path word\n\tswitch \"$path|$word\"\n")
	for _, k := range sortedSubs(t.Sub) {
		fmt.Fprintf(&b, "\t\tcase %s\n\t\t\techo %s\n", sq(k), sq(t.Sub[k]))
	}
	b.WriteString("\t\tcase '*'\n\t\t\treturn 1\n\tend\nend\n\n")
	b.WriteString("function __ferry_words --argument-names path\n\tswitch \"$path\"\n")
	for _, p := range t.Paths {
		fmt.Fprintf(&b, "\t\tcase %s\n\t\t\tprintf '%%s\\n' %s\n", sq(p), strings.Join(quoteAll(t.Words[p]), " "))
	}
	b.WriteString("\tend\nend\n\n")
	b.WriteString("function __ferry_values --argument-names path flag\n\tswitch \"$path|$flag\"\n")
	for _, k := range slices.Sorted(maps.Keys(t.Values)) {
		fmt.Fprintf(&b, "\t\tcase %s\n", sq(k))
		if len(t.Values[k]) > 0 {
			fmt.Fprintf(&b, "\t\t\tprintf '%%s\\n' %s\n", strings.Join(quoteAll(t.Values[k]), " "))
		} else {
			b.WriteString("\t\t\treturn 0\n")
		}
	}
	b.WriteString("\t\tcase '*'\n\t\t\treturn 1\n\tend\nend\n\n")
	b.WriteString(`function __ferry_complete
	set -l words (commandline -opc)
	set -l cur (commandline -ct)
	set -l path ''
	set -l skip 0
	for w in $words[2..-1]
		if test $skip = 1
			set skip 0
			continue
		end
		switch $w
			case '--*=*'
				continue
			case '-*'
				if __ferry_values "$path" $w >/dev/null
					set skip 1
				end
				continue
		end
		set -l n (__ferry_sub "$path" $w)
		and set path $n
	end
	if test (count $words) -gt 1
		set -l vals (__ferry_values "$path" $words[-1])
		if test $status = 0
			if test (count $vals) -gt 0
				printf '%s\n' $vals
			else
				__fish_complete_path $cur
			end
			return
		end
	end
	__ferry_words "$path"
end

complete -c ferry -f -a '(__ferry_complete)'
`)
	return b.Bytes()
}

func quoteAll(ws []string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = sq(w)
	}
	return out
}

// psq quotes s for PowerShell (a single quote doubled).
func psq(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func psList(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = psq(w)
	}
	return "@(" + strings.Join(q, ", ") + ")"
}

func powershellCompletion(t *complTable) []byte {
	var b bytes.Buffer
	b.WriteString("# PowerShell completion for ferry (generated by `ferry completion powershell`)\n\n")
	b.WriteString("Register-ArgumentCompleter -Native -CommandName 'ferry', 'ferry.exe' -ScriptBlock {\n")
	b.WriteString("\tparam($wordToComplete, $commandAst, $cursorPosition)\n")
	b.WriteString("\t$subs = @{\n")
	for _, k := range sortedSubs(t.Sub) {
		fmt.Fprintf(&b, "\t\t%s = %s\n", psq(k), psq(t.Sub[k]))
	}
	b.WriteString("\t}\n\t$words = @{\n")
	for _, p := range t.Paths {
		fmt.Fprintf(&b, "\t\t%s = %s\n", psq(p), psList(t.Words[p]))
	}
	b.WriteString("\t}\n\t$values = @{\n")
	for _, k := range slices.Sorted(maps.Keys(t.Values)) {
		fmt.Fprintf(&b, "\t\t%s = %s\n", psq(k), psList(t.Values[k]))
	}
	b.WriteString(`	}
	$elements = @($commandAst.CommandElements | Where-Object { $_.Extent.EndOffset -le $cursorPosition } | ForEach-Object { $_.ToString() })
	if ($wordToComplete -ne '' -and $elements.Count -gt 0) { $elements = @($elements | Select-Object -SkipLast 1) }
	$path = ''
	$skip = $false
	$prev = ''
	foreach ($w in ($elements | Select-Object -Skip 1)) {
		$prev = $w
		if ($skip) { $skip = $false; continue }
		if ($w -like '--*=*') { continue }
		if ($w -like '-*') { if ($values.ContainsKey("$path|$w")) { $skip = $true }; continue }
		if ($subs.ContainsKey("$path|$w")) { $path = $subs["$path|$w"] }
	}
	$candidates = $words[$path]
	if ($prev -like '-*' -and $values.ContainsKey("$path|$prev")) {
		$candidates = $values["$path|$prev"]
		if ($candidates.Count -eq 0) { return }
	}
	$candidates | Where-Object { $_ -like "$wordToComplete*" } | ForEach-Object {
		[System.Management.Automation.CompletionResult]::new($_, $_, 'ParameterValue', $_)
	}
}
`)
	return b.Bytes()
}
