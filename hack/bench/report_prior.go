package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// apartMarker ends the heading of a section measured apart from the bench (by a test, say):
// the bench keeps such sections of the report it replaces, as they are.
const apartMarker = "(measured apart from `make bench`)"

// priorReport is a report written before, cut at its sections' headings ("## ").
type priorReport struct {
	// header is what precedes the first section: the title and the run it describes.
	header string
	// steps holds, by step name, the numbered sections that step wrote, in their order.
	steps map[string]string
	// apart holds the sections whose heading carries apartMarker.
	apart string
}

// parsePrior cuts text, a report, into its header and its sections: a section numbered n
// ("## n. …", its "### " subsections included) goes to the step stepOf[n], one measured apart to
// apart; the others (such as "Rerunning", which every run writes anew) are dropped.
func parsePrior(text string, stepOf map[int]string) priorReport {
	prior := priorReport{steps: map[string]string{}}
	var header, apart strings.Builder
	into := &header
	sections := map[string]*strings.Builder{}
	var order []string
	for _, line := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(line, "## ") {
			into = nil
			num, _, _ := strings.Cut(strings.TrimPrefix(line, "## "), ".")
			n, err := strconv.Atoi(num)
			switch {
			case strings.Contains(line, apartMarker):
				into = &apart
			case err == nil && stepOf[n] != "":
				if sections[stepOf[n]] == nil {
					sections[stepOf[n]] = &strings.Builder{}
					order = append(order, stepOf[n])
				}
				into = sections[stepOf[n]]
			}
		}
		if into != nil {
			into.WriteString(line)
		}
	}
	prior.header, prior.apart = header.String(), apart.String()
	for _, name := range order {
		prior.steps[name] = sections[name].String()
	}
	return prior
}

// readPrior is the report at path, or an empty one when there is none.
func readPrior(path string) priorReport {
	raw, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return priorReport{steps: map[string]string{}}
	}
	return parsePrior(string(raw), sectionSteps())
}

// markRerun puts note under every section heading ("## ") of text: the sections a run of some
// parts writes into a report whose other sections, and header, are an earlier run's.
func markRerun(text, note string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		b.WriteString(line)
		if strings.HasPrefix(line, "## ") {
			b.WriteString("\n" + note + "\n")
		}
	}
	return b.String()
}
