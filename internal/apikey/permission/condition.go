package permission

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
)

// The bounds of a condition's cost, in CEL's cost units: what its estimate may be at admission,
// and what one evaluation may spend (past it, it errs, and fails closed).
const (
	MaxConditionCost = 10_000
	// maxStringSize and maxCaptures are the sizes the estimate assumes of the request's strings
	// (a long path) and of request.params (a template of 256 characters has at most 128).
	maxStringSize = 2048
	maxCaptures   = 128
)

// The variables a condition reads.
const (
	varMethod   = "request.method"
	varPath     = "request.path"
	varParams   = "request.params"
	varAudience = "request.audience"
	varSource   = "request.source"
)

// environment is the CEL environment of conditions, made once.
var environment = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(varMethod, cel.StringType),
		cel.Variable(varPath, cel.StringType),
		cel.Variable(varParams, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(varAudience, cel.StringType),
		cel.Variable(varSource, cel.StringType),
	)
})

// condition is a compiled condition.
type condition struct {
	program cel.Program
}

// compileCondition compiles src: a boolean expression whose estimated cost is at most
// MaxConditionCost.
func compileCondition(src string) (*condition, error) {
	env, err := environment()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, issues(iss)
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("is a %s, not a bool", ast.OutputType())
	}
	est, err := env.EstimateCost(ast, requestSizes{})
	if err != nil {
		return nil, err
	}
	if est.Max > MaxConditionCost {
		return nil, fmt.Errorf("could cost %d, more than the %d a condition may: simplify it (fewer regular expressions, loops or string operations)", est.Max, MaxConditionCost)
	}
	prg, err := env.Program(ast, cel.CostLimit(MaxConditionCost))
	if err != nil {
		return nil, err
	}
	return &condition{program: prg}, nil
}

// issues are what CEL found wrong, on one line each with its column (CEL's own text draws the
// source under it), and the variables when one was not known.
func issues(iss *cel.Issues) error {
	var msgs []string
	undeclared := false
	for _, e := range iss.Errors() {
		msgs = append(msgs, fmt.Sprintf("%s (column %d)", e.Message, e.Location.Column()+1))
		undeclared = undeclared || strings.Contains(e.Message, "undeclared reference")
	}
	if undeclared {
		msgs = append(msgs, "a condition reads "+strings.Join([]string{varMethod, varPath, varParams, varAudience, varSource}, ", "))
	}
	return errors.New(strings.Join(msgs, "; "))
}

// eval evaluates c over req, whose path (without its query) is path and captures params.
func (c *condition) eval(req *Request, path string, params map[string]string) (bool, error) {
	if params == nil {
		params = map[string]string{}
	}
	source := ""
	if req.SourceKnown {
		source = req.Source.String()
	}
	out, _, err := c.program.Eval(map[string]any{
		varMethod: req.Method, varPath: path, varParams: params, varAudience: req.Audience, varSource: source,
	})
	if err != nil {
		return false, err
	}
	ok, isBool := out.Value().(bool)
	if !isBool {
		return false, errors.New("the condition is not a bool")
	}
	return ok, nil
}

// requestSizes tells the cost estimate the largest sizes of the request's variables.
type requestSizes struct{}

func (requestSizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if p := n.Path(); len(p) == 1 && p[0] == varParams {
		return &checker.SizeEstimate{Min: 0, Max: maxCaptures}
	}
	if n.Type().IsExactType(cel.StringType) {
		return &checker.SizeEstimate{Min: 0, Max: maxStringSize}
	}
	return nil
}

func (requestSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}
