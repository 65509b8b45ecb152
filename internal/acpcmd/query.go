package acpcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/cmdflag"
)

// The query subcommands (models, auth-methods, authenticate) spawn the agent, ask it one thing,
// print the answer and exit. They need no relay and no key.

type queryOptions struct {
	agentCommand, agentArgs, agentCwd string
	json                              bool
	timeout                           int
}

func (q *queryOptions) flags(cmd *cobra.Command, withJSON bool) {
	f := cmdflag.On(cmd.Flags())
	f.String(&q.agentCommand, "agent-command", "BUZZ_ACP_AGENT_COMMAND", defaultAgent, "ACP agent to ask")
	f.String(&q.agentArgs, "agent-args", "BUZZ_ACP_AGENT_ARGS", "", "agent arguments, comma-separated")
	f.String(&q.agentCwd, "agent-cwd", "BUZZ_ACP_AGENT_CWD", "", "agent working directory (default: current directory)")
	cmd.Flags().IntVar(&q.timeout, "timeout", 10, "seconds the agent may take to answer")
	if withJSON {
		cmd.Flags().BoolVar(&q.json, "json", false, "print JSON")
	}
}

// agentSession is a spawned, initialized agent.
type agentSession struct {
	proc *acp.Process
	init *acp.InitializeResult
	cwd  string
}

// start spawns and initializes the agent; ctx bounds the whole query.
func (q *queryOptions) start(ctx context.Context) (*agentSession, error) {
	command, err := resolveAgent(q.agentCommand)
	if err != nil {
		return nil, err
	}
	cwd, err := absDir(q.agentCwd)
	if err != nil {
		return nil, fmt.Errorf("--agent-cwd: %w", err)
	}
	proc, err := acp.Spawn(ctx, acp.SpawnConfig{Command: command, Args: cmdflag.List(q.agentArgs), Dir: cwd,
		Client: acp.ClientConfig{ClientVersion: Version}})
	if err != nil {
		return nil, err
	}
	init, err := proc.Initialize(ctx)
	if err != nil {
		_ = proc.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return &agentSession{proc: proc, init: init, cwd: cwd}, nil
}

// ask runs fn against a freshly spawned, initialized agent within --timeout, then stops it.
func (q *queryOptions) ask(cmd *cobra.Command, fn func(ctx context.Context, a *agentSession) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), time.Duration(max(q.timeout, 1))*time.Second)
	defer cancel()
	a, err := q.start(ctx)
	if err != nil {
		return err
	}
	defer a.proc.Close()
	return fn(ctx, a)
}

type agentJSON struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

func modelsCommand() *cobra.Command {
	var q queryOptions
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List the models the agent offers (spawns it and opens one session)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return q.ask(cmd, func(ctx context.Context, a *agentSession) error {
				_, st, err := a.proc.NewSessionState(ctx, acp.SessionParams{Cwd: a.cwd})
				if err != nil {
					return fmt.Errorf("session/new: %w", err)
				}
				stable := []acp.ConfigOption{}
				for _, o := range st.ConfigOptions {
					if o.Category == "model" {
						stable = append(stable, o)
					}
				}
				if q.json {
					return writeJSON(cmd.OutOrStdout(), map[string]any{
						"agent":    agentJSON{a.init.AgentName, a.init.AgentVersion},
						"stable":   map[string]any{"configOptions": stable},
						"unstable": st.Models, // null when the agent has no models list
					})
				}
				return printModels(cmd.OutOrStdout(), a.init, stable, st.Models)
			})
		},
	}
	q.flags(cmd, true)
	return cmd
}

func printModels(w io.Writer, init *acp.InitializeResult, stable []acp.ConfigOption, models *acp.ModelState) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "agent: %s %s\n", init.AgentName, init.AgentVersion)
	for _, o := range stable {
		fmt.Fprintf(tw, "\nconfig option %q (set with --model), current %s:\n", o.ID, o.CurrentValue)
		for _, v := range o.Options {
			fmt.Fprintf(tw, "  %s\t%s\n", v.Value, v.Name)
		}
	}
	if models != nil {
		fmt.Fprintf(tw, "\nunstable models (session/set_model), current %s:\n", models.CurrentModelID)
		for _, m := range models.AvailableModels {
			fmt.Fprintf(tw, "  %s\t%s\n", m.ModelID, m.Name)
		}
	}
	if len(stable) == 0 && models == nil {
		fmt.Fprintln(tw, "\nthe agent offers no model choice")
	}
	return tw.Flush()
}

// authMethod is the part of an advertised auth method the text output shows.
type authMethod struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description"`
}

func authMethodsCommand() *cobra.Command {
	var q queryOptions
	cmd := &cobra.Command{
		Use:   "auth-methods",
		Short: "List the ways the agent can be authenticated (from its initialize answer)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return q.ask(cmd, func(_ context.Context, a *agentSession) error {
				methods := a.init.AuthMethods
				if methods == nil {
					methods = []json.RawMessage{}
				}
				if q.json {
					return writeJSON(cmd.OutOrStdout(), map[string]any{"agent": agentJSON{a.init.AgentName, a.init.AgentVersion}, "authMethods": methods})
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 8, 2, ' ', 0)
				fmt.Fprintf(tw, "agent: %s %s\n", a.init.AgentName, a.init.AgentVersion)
				if len(methods) == 0 {
					fmt.Fprintln(tw, "the agent advertises no auth methods")
				}
				for _, raw := range methods {
					var m authMethod
					_ = json.Unmarshal(raw, &m) // lenient: odd entries print blank fields
					if m.Type == "" {
						m.Type = "agent" // ACP's default kind: usable with `authenticate`
					}
					fmt.Fprintf(tw, "  %s\t%s\t(%s)\t%s\n", m.ID, m.Name, m.Type, m.Description)
				}
				return tw.Flush()
			})
		},
	}
	q.flags(cmd, true)
	return cmd
}

func authenticateCommand() *cobra.Command {
	var q queryOptions
	var methodID string
	cmd := &cobra.Command{
		Use:   "authenticate",
		Short: "Authenticate the agent with one of its auth methods",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if methodID == "" {
				return errors.New("--method-id is required (see `buzz-acp auth-methods`)")
			}
			return q.ask(cmd, func(ctx context.Context, a *agentSession) error {
				if err := a.proc.Call(ctx, "authenticate", map[string]any{"methodId": methodID}, nil); err != nil {
					return fmt.Errorf("authenticate %s: %w", methodID, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "authenticated %s %s with %s\n", a.init.AgentName, a.init.AgentVersion, methodID)
				return nil
			})
		},
	}
	q.flags(cmd, false)
	cmd.Flags().StringVar(&methodID, "method-id", "", "auth method id (from `buzz-acp auth-methods`)")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
