(** * Which answer: the priority (first-solution) specification

    [match_pattern_sound] says the machine's answer is *some* declarative
    match. This file says *which* one: the first element of an ordered
    list of matches defined by recursion on the pattern, in the style of
    Linden's backtracking trees (not by running the machine), ordered as the
    alternates and the operator-variable choices are tried. There are two
    such specifications; the second covers the whole calculus and, on the
    fragment of the first, is the first ([solutions_k_frag]).

    ** 1. The call-free, [∃]-free fragment ([in_frag])

    [solutions G σ ψ p t] is the ordered list of the declarative matches
    of [p] at [t] extending ⟨σ, ψ⟩ (substitutions of the pattern's
    variables):
    - [x]: the one solution binding [x] to [t] (or keeping ⟨σ, ψ⟩ if
      [σ(x) = t]), none if [σ(x)] is another node;
    - [f(p1..pn)]: the solutions of [p1], and for each of them, in order,
      the solutions of [p2..pn] extending it (lexicographic order: the
      leftmost argument's choice varies slowest);
    - [p1 ‖ p2]: the solutions of [p1], then those of [p2] (P-ALT-1 is
      tried first, as ST-MATCH-ALT pushes [p2] as the backtrack frame);
    - [p ; guard(g)]: the solutions of [p] whose guard is true, in order;
    - [p ; (p' ≈ x)]: for each solution of [p], the solutions of [p'] at
      the node bound to [x];
    - [F(p1..pn)]: as [f(p1..pn)], with [F] bound to [t]'s operator first.

    Theorems ([first_solution], [first_solution_complete]): for a pattern
    of the fragment whose variables are in the root's scope, if
    [match_pattern] answers [OSuccess Θ Φ] then [solutions] is not empty
    and ⟨Θ, Φ⟩ (read through the root's scope) is its FIRST element; if it
    answers [OFailure], [solutions] is empty; and if [solutions] has a first
    element, enough fuel makes [match_pattern] return it. [solutions_sound]
    says every element is a declarative match. [match_root_first],
    [match_root_none_first]: the same for the library's answer.

    ** 2. The whole calculus: calls and [∃] ([psols], [solutions_k])

    [solutions_k G D K n m p t] lists the solutions of a root pattern
    [p] (parameters [0..n-1] / [0..m-1]) at [t], read as substitutions of
    the root's variables, with calls unfolded at most [K] deep. It reads
    [psols G D d B Θ Φ p t ρ], the recursion of [solutions] with two
    changes.
    - Scopes. A pattern's variables are read through a scope [ρ] into
      slots, and [Θ] / [Φ] substitute slots, as in the machine ([Env.v]).
      A call [P(x1..xn)] matches the body of [P] in the scope
      [call_env ρ xs Fs], whose parameter [i] is the slot of the caller's
      [xi] (P-MU): so [P(x, x)] aliases its two parameters, which a
      substitution of variables alone cannot express. [∃x.p] gives [x] the
      slot [B] (one no enclosing scope uses), matches [p] there, keeps the
      solutions that bind [x] and drops its value ([clr]): the witness of
      P-EXISTS is chosen by the match of [p], then hidden. Slots are
      allocated as a stack (siblings reuse [B]), so the specification does
      not depend on how many slots the machine spent in branches it
      abandoned; the proof relates the two by a renaming of slots
      ([wmrel]).
    - Depth. A call past depth [K] is a cut [PCut], after which nothing is
      known: [papp PCut l = PCut]. The machine is a depth-first search and
      never gets past an unfinished branch, so a solution listed after one
      cannot be claimed to come first. (With plain lists truncated at
      depth [K], "the machine returns the first element" is false:
      for [P(x) = P(x) ‖ Relu(x)] at a [Relu] the truncated list is
      [Relu]'s solution [K] times while the machine runs out of fuel.)

    Theorems:
    - [first_solution_k]: if [match_pattern G D fuel n m p t] answers
      [OSuccess Θ Φ], then for every depth [K >= fuel], [solutions_k K] is
      [PCons (σ, ψ) _] with ⟨Θ, Φ⟩ read through the root's scope equal to
      ⟨σ, ψ⟩; if it answers [OFailure], [solutions_k K = PNil].
    - [first_solution_k_complete]: if [solutions_k K] has a first element
      ⟨σ, ψ⟩ at some depth, enough fuel makes the machine answer it; if it
      is [PNil], enough fuel makes the machine fail.
    - [solutions_k_cut]: a cut at depth [K] means the machine has not
      answered within [K] steps.
    - [first_solution_k_stable]: whatever the depth, [solutions_k] begins
      with the machine's answer or is still a cut: unfolding deeper never
      changes the first solution once it is known (earlier alternates gain
      no solutions: they were the cut).
    - [solutions_k_sound]: every element is a declarative match;
      [solutions_k_nil]: [PNil] means no declarative match at all (for
      well-formed patterns, via [match_pattern_fail_sound]).
    - [solutions_k_mono]: the depth-[K] lists approximate one list:
      unfolding deeper keeps every solution known at depth [K], in its
      place, and only replaces the cut.
    - [solutions_k_frag]: on the fragment, [solutions_k] has no cut, at any
      depth, and is [solutions] element by element.
    - [match_root_first_k], [match_root_none_k]: the library's answer
      ([match_root], behind [pypm_match] and every [pypm_match_all] entry):
      its bindings are the first element of [solutions_k K] for every
      [K >= fuel], and "no match" means no depth has a first element.

    The proof ([WKB_all]) reads each pending item of the specification
    ([witem]: a match, a guard, a constraint, the end of an [∃]) as the
    machine's action under a renaming [r] of the specification's slots
    into the machine's, injective and below the machine's fresh counter:
    from any state so related, the machine reaches [success] with the first
    element, gives up to its saved frames when the list is [PNil], or is
    still running after [c] steps at a cut ([wfirst]), where every pending
    item has at least [c] calls' depth left ([wbud]).

    Not proved: that every declarative match appears in the list (up to
    weakening); the list's elements after the first are specified only as
    the order of the search, not compared with the machine (which stops at
    the first). *)

From Coq Require Import ZArith List Bool Arith Lia.
From PyPM Require Import Syntax Subst Declarative Env Algorithmic Interpreter Soundness
  RootIndex Entry.
Import ListNotations.

Section Priority.
  Variable G : graph.
  Variable D : list pdef.

  Definition sol := (tsubst * fsubst)%type.

  Definition guard_ok (σ : tsubst) (ψ : fsubst) (g : guard) : bool :=
    match eval_guard G σ ψ g with Some true => true | _ => false end.

  (** The list premise of P-FUN, for a given [solutions] of one argument. *)
  Definition sols_list_with (rec : tsubst -> fsubst -> pattern -> node -> list sol) :=
    fix go (σ : tsubst) (ψ : fsubst) (ps : list pattern) (ts : list node) : list sol :=
      match ps, ts with
      | [], [] => [(σ, ψ)]
      | q :: ps', u :: ts' =>
          flat_map (fun s => go (fst s) (snd s) ps' ts') (rec σ ψ q u)
      | _, _ => []
      end.

  (** The ordered solutions of [p] at [t] extending ⟨σ, ψ⟩. *)
  Fixpoint solutions (σ : tsubst) (ψ : fsubst) (p : pattern) (t : node) {struct p}
    : list sol :=
    match p with
    | PVar x =>
        match σ x with
        | Some t' => if Nat.eqb t' t then [(σ, ψ)] else []
        | None => [(upd σ x t, ψ)]
        end
    | PApp f ps =>
        if Nat.eqb (label G t) f then sols_list_with solutions σ ψ ps (children G t) else []
    | PAlt p1 p2 => solutions σ ψ p1 t ++ solutions σ ψ p2 t
    | PGuard p g => filter (fun s => guard_ok (fst s) (snd s) g) (solutions σ ψ p t)
    | PConstr p p' x =>
        flat_map (fun s => match fst s x with
                           | Some t' => solutions (fst s) (snd s) p' t'
                           | None => []
                           end) (solutions σ ψ p t)
    | PFunVar F ps =>
        match ψ F with
        | Some f =>
            if Nat.eqb f (label G t) then sols_list_with solutions σ ψ ps (children G t)
            else []
        | None => sols_list_with solutions σ (upd ψ F (label G t)) ps (children G t)
        end
    | PExists _ _ | PExistsF _ _ | PCall _ _ _ => []
    end.

  Definition solutions_list := sols_list_with solutions.

  (** The fragment: no call, no [∃]; term variables below [n], operator
      variables below [m] (the root's scope). *)
  Fixpoint in_frag (n m : nat) (p : pattern) : bool :=
    match p with
    | PVar x => Nat.ltb x n
    | PApp _ ps => forallb (in_frag n m) ps
    | PAlt p1 p2 => in_frag n m p1 && in_frag n m p2
    | PGuard p _ => in_frag n m p
    | PConstr p p' _ => in_frag n m p && in_frag n m p'
    | PFunVar F ps => Nat.ltb F m && forallb (in_frag n m) ps
    | PExists _ _ | PExistsF _ _ | PCall _ _ _ => false
    end.

  (** ** Continuations of the specification

      [ksols σ ψ k L]: the ordered solutions of the list of pending items
      [k] from ⟨σ, ψ⟩ are [L]. A bridge between [solutions] (a function of
      the pattern) and the machine (which keeps a continuation). *)
  Inductive item :=
  | IMatch (p : pattern) (t : node)
  | IGuard (g : guard)
  | IConstr (p : pattern) (x : var).

  Fixpoint items (ps : list pattern) (ts : list node) (k : list item) : list item :=
    match ps, ts with
    | p :: ps', t :: ts' => IMatch p t :: items ps' ts' k
    | _, _ => k
    end.

  Inductive ksols : tsubst -> fsubst -> list item -> list sol -> Prop :=
  | K_Nil : forall σ ψ, ksols σ ψ [] [(σ, ψ)]
  | K_VarBound : forall σ ψ x t k L,
      σ x = Some t -> ksols σ ψ k L -> ksols σ ψ (IMatch (PVar x) t :: k) L
  | K_VarConflict : forall σ ψ x t t' k,
      σ x = Some t' -> t' <> t -> ksols σ ψ (IMatch (PVar x) t :: k) []
  | K_VarBind : forall σ ψ x t k L,
      σ x = None -> ksols (upd σ x t) ψ k L -> ksols σ ψ (IMatch (PVar x) t :: k) L
  | K_App : forall σ ψ f ps t k L,
      label G t = f -> length ps = length (children G t) ->
      ksols σ ψ (items ps (children G t) k) L -> ksols σ ψ (IMatch (PApp f ps) t :: k) L
  | K_AppConflict : forall σ ψ f ps t k,
      label G t <> f \/ length ps <> length (children G t) ->
      ksols σ ψ (IMatch (PApp f ps) t :: k) []
  | K_Alt : forall σ ψ p1 p2 t k L1 L2,
      ksols σ ψ (IMatch p1 t :: k) L1 -> ksols σ ψ (IMatch p2 t :: k) L2 ->
      ksols σ ψ (IMatch (PAlt p1 p2) t :: k) (L1 ++ L2)
  | K_Guard : forall σ ψ p g t k L,
      ksols σ ψ (IMatch p t :: IGuard g :: k) L -> ksols σ ψ (IMatch (PGuard p g) t :: k) L
  | K_GuardTrue : forall σ ψ g k L,
      eval_guard G σ ψ g = Some true -> ksols σ ψ k L -> ksols σ ψ (IGuard g :: k) L
  | K_GuardFalse : forall σ ψ g k,
      eval_guard G σ ψ g <> Some true -> ksols σ ψ (IGuard g :: k) []
  | K_Constr : forall σ ψ p p' x t k L,
      ksols σ ψ (IMatch p t :: IConstr p' x :: k) L ->
      ksols σ ψ (IMatch (PConstr p p' x) t :: k) L
  | K_ConstrSome : forall σ ψ p x t k L,
      σ x = Some t -> ksols σ ψ (IMatch p t :: k) L -> ksols σ ψ (IConstr p x :: k) L
  | K_ConstrNone : forall σ ψ p x k,
      σ x = None -> ksols σ ψ (IConstr p x :: k) []
  | K_FunVarBound : forall σ ψ F ps t k L,
      ψ F = Some (label G t) -> length ps = length (children G t) ->
      ksols σ ψ (items ps (children G t) k) L -> ksols σ ψ (IMatch (PFunVar F ps) t :: k) L
  | K_FunVarConflict : forall σ ψ F ps t k,
      (exists f, ψ F = Some f /\ f <> label G t) \/ length ps <> length (children G t) ->
      ksols σ ψ (IMatch (PFunVar F ps) t :: k) []
  | K_FunVarBind : forall σ ψ F ps t k L,
      ψ F = None -> length ps = length (children G t) ->
      ksols σ (upd ψ F (label G t)) (items ps (children G t) k) L ->
      ksols σ ψ (IMatch (PFunVar F ps) t :: k) L.

  Lemma flat_map_nil : forall A B (l : list A),
    flat_map (fun _ : A => @nil B) l = [].
  Proof. induction l; simpl; auto. Qed.

  Lemma flat_map_flat_map : forall A B C (f : B -> list C) (h : A -> list B) l,
    flat_map f (flat_map h l) = flat_map (fun a => flat_map f (h a)) l.
  Proof.
    induction l as [|a l IH]; simpl; auto. rewrite flat_map_app, IH. reflexivity.
  Qed.

  Lemma flat_map_filter : forall A B (f : A -> list B) (c : A -> bool) l,
    flat_map f (filter c l) = flat_map (fun a => if c a then f a else []) l.
  Proof.
    induction l as [|a l IH]; simpl; auto. destruct (c a); simpl; rewrite IH; auto.
  Qed.

  Lemma solutions_list_len : forall ps σ ψ ts,
    length ps <> length ts -> solutions_list σ ψ ps ts = [].
  Proof.
    induction ps as [|q ps IH]; intros σ ψ ts H; destruct ts as [|u ts]; simpl in *;
      try reflexivity; try congruence.
    unfold solutions_list in IH.
    erewrite flat_map_ext; [apply flat_map_nil|]. intros s. apply IH. congruence.
  Qed.

  Lemma solutions_list_cons : forall σ ψ q ps u ts,
    solutions_list σ ψ (q :: ps) (u :: ts) =
    flat_map (fun s => solutions_list (fst s) (snd s) ps ts) (solutions σ ψ q u).
  Proof. reflexivity. Qed.

  Section Frag.
    Variables n m : nat.

    Definition KP (p : pattern) : Prop :=
      in_frag n m p = true ->
      forall σ ψ t k (Ls : sol -> list sol),
        (forall σ' ψ', ksols σ' ψ' k (Ls (σ', ψ'))) ->
        ksols σ ψ (IMatch p t :: k) (flat_map Ls (solutions σ ψ p t)).

    Lemma ksols_list : forall ps, Forall KP ps -> forallb (in_frag n m) ps = true ->
      forall σ ψ ts k (Ls : sol -> list sol),
        length ps = length ts ->
        (forall σ' ψ', ksols σ' ψ' k (Ls (σ', ψ'))) ->
        ksols σ ψ (items ps ts k) (flat_map Ls (solutions_list σ ψ ps ts)).
    Proof.
      induction 1 as [|q ps Hq Hps IH]; intros Hf σ ψ ts k Ls Hl HL;
        destruct ts as [|u ts]; simpl in Hl; try discriminate.
      - simpl. rewrite app_nil_r. apply HL.
      - simpl in Hf. apply andb_prop in Hf. destruct Hf as [Hf1 Hf2].
        rewrite solutions_list_cons, flat_map_flat_map. simpl.
        apply (Hq Hf1 σ ψ u (items ps ts k)
                 (fun s => flat_map Ls (solutions_list (fst s) (snd s) ps ts))).
        intros σ' ψ'. simpl. apply IH; auto.
    Qed.

    Lemma ksols_solutions : forall p, KP p.
    Proof.
      induction p as [x|f ps Hps|p1 p2 IHp1 IHp2|p g IHp|x p IHp|F p IHp|p p' x IHp1 IHp2|F ps Hps|Q xs Fs]
        using pattern_ind'; unfold KP;
        intros Hf σ ψ t k Ls HL; simpl in Hf.
      - (* x *) simpl. destruct (σ x) as [t'|] eqn:Hx.
        + destruct (Nat.eqb t' t) eqn:E.
          * apply Nat.eqb_eq in E. subst. simpl. rewrite app_nil_r.
            apply K_VarBound; auto.
          * apply Nat.eqb_neq in E. eapply K_VarConflict; eauto.
        + simpl. rewrite app_nil_r. apply K_VarBind; auto.
      - (* f(ps) *) simpl. destruct (Nat.eqb (label G t) f) eqn:E.
        + apply Nat.eqb_eq in E.
          destruct (Nat.eq_dec (length ps) (length (children G t))) as [Hl|Hl].
          * apply K_App; auto. apply ksols_list; auto.
          * pose proof (solutions_list_len ps σ ψ (children G t) Hl) as Hn.
            unfold solutions_list in Hn. rewrite Hn. apply K_AppConflict. auto.
        + apply Nat.eqb_neq in E. apply K_AppConflict. auto.
      - (* p1 ‖ p2 *) apply andb_prop in Hf. destruct Hf.
        simpl. rewrite flat_map_app. apply K_Alt; [apply IHp1 | apply IHp2]; auto.
      - (* guard *) simpl. rewrite flat_map_filter. apply K_Guard.
        apply (IHp Hf σ ψ t (IGuard g :: k)
                 (fun s => if guard_ok (fst s) (snd s) g then Ls s else [])).
        intros σ' ψ'. simpl. unfold guard_ok.
        destruct (eval_guard G σ' ψ' g) as [[|]|] eqn:E.
        + apply K_GuardTrue; auto.
        + apply K_GuardFalse. congruence.
        + apply K_GuardFalse. congruence.
      - (* ∃x *) discriminate.
      - (* ∃F *) discriminate.
      - (* constraint *) apply andb_prop in Hf. destruct Hf as [Hf1 Hf2].
        simpl. rewrite flat_map_flat_map. apply K_Constr.
        apply (IHp1 Hf1 σ ψ t (IConstr p' x :: k)
                 (fun s => flat_map Ls (match fst s x with
                                        | Some t' => solutions (fst s) (snd s) p' t'
                                        | None => [] end))).
        intros σ' ψ'. simpl. destruct (σ' x) as [t'|] eqn:Hx.
        + apply K_ConstrSome with (t := t'); auto.
        + apply K_ConstrNone. auto.
      - (* F(ps) *) apply andb_prop in Hf. destruct Hf as [_ Hf]. simpl.
        destruct (Nat.eq_dec (length ps) (length (children G t))) as [Hl|Hl].
        + destruct (ψ F) as [f|] eqn:HF.
          * destruct (Nat.eqb f (label G t)) eqn:E.
            -- apply Nat.eqb_eq in E. subst. apply K_FunVarBound; auto.
               apply ksols_list; auto.
            -- apply Nat.eqb_neq in E. apply K_FunVarConflict. left. eauto.
          * apply K_FunVarBind; auto. apply ksols_list; auto.
        + pose proof (solutions_list_len ps) as Hn. unfold solutions_list in Hn.
          destruct (ψ F) as [f|]; [destruct (Nat.eqb f (label G t))|];
            rewrite ?Hn by exact Hl; simpl; apply K_FunVarConflict; auto.
      - (* call *) discriminate.
    Qed.
  End Frag.
  (** ** The machine follows the specification *)

  Section Machine.
    Variables n m : nat.

    Definition ρ0 : env := root_env n m.

    Definition to_action (i : item) : action :=
      match i with
      | IMatch p t => AMatch p t ρ0
      | IGuard g => AGuard g ρ0
      | IConstr p x => AMatchConstr p x ρ0
      end.

    Definition item_ok (i : item) : Prop :=
      match i with
      | IMatch p _ | IConstr p _ => in_frag n m p = true
      | IGuard _ => True
      end.

    (** ⟨Θ, Φ⟩ read through the root's scope is ⟨σ, ψ⟩. *)
    Definition rel (Θ Φ : subst) (σ : tsubst) (ψ : fsubst) : Prop :=
      (forall x, tsub Θ ρ0 x = σ x) /\ (forall F, fsub Φ ρ0 F = ψ F).

    (** What the machine does from [st] with saved frames [stk] below it:
        it succeeds with the first solution, or gives up to [stk]. *)
    Definition first_out (L : list sol) (st : state) (nf : nat) (stk : list frame) : Prop :=
      match L with
      | [] => star G D st (backtrack nf stk)
      | (σ', ψ') :: _ => exists Θ' Φ', star G D st (Success Θ' Φ') /\ rel Θ' Φ' σ' ψ'
      end.

    Definition behaves (σ : tsubst) (ψ : fsubst) (k : list item) (L : list sol) : Prop :=
      forall Θ Φ nf stk, rel Θ Φ σ ψ -> Forall item_ok k ->
        first_out L (Running Θ Φ nf stk (map to_action k)) nf stk.

    Lemma star_trans' : forall st1 st2 st3,
      star G D st1 st2 -> star G D st2 st3 -> star G D st1 st3.
    Proof.
      intros st1 st2 st3 H. induction H; auto. intros. eapply star_step; eauto.
    Qed.

    Lemma star_first_out : forall L st st' nf stk,
      star G D st st' -> first_out L st' nf stk -> first_out L st nf stk.
    Proof.
      intros [|[σ' ψ'] L] st st' nf stk Hs H; simpl in *.
      - eapply star_trans'; eauto.
      - destruct H as (Θ' & Φ' & H1 & H2). exists Θ', Φ'. split; auto.
        eapply star_trans'; eauto.
    Qed.

    Lemma step_first_out : forall L st st' nf stk,
      step G D st st' -> first_out L st' nf stk -> first_out L st nf stk.
    Proof.
      intros. eapply star_first_out; [|eauto]. eapply star_step; [eauto|apply star_refl].
    Qed.

    Lemma tsub_root : forall Θ x,
      tsub Θ ρ0 x = if Nat.ltb x n then lookup x Θ else None.
    Proof.
      intros. unfold tsub, gsub, ρ0, root_env. simpl. rewrite vfind_ident_map.
      destruct (Nat.ltb x n); reflexivity.
    Qed.

    Lemma fsub_root : forall Φ F,
      fsub Φ ρ0 F = if Nat.ltb F m then lookup F Φ else None.
    Proof.
      intros. unfold fsub, gsub, ρ0, root_env. simpl. rewrite vfind_ident_map.
      destruct (Nat.ltb F m); reflexivity.
    Qed.

    Lemma rel_bind_t : forall Θ Φ σ ψ x t,
      rel Θ Φ σ ψ -> x < n -> rel (extend x t Θ) Φ (upd σ x t) ψ.
    Proof.
      intros Θ Φ σ ψ x t [Hs Hf] Hx. split; auto. intros y.
      rewrite tsub_root. unfold upd. rewrite <- Hs, tsub_root.
      destruct (Nat.eqb x y) eqn:E.
      - apply Nat.eqb_eq in E. subst. rewrite (proj2 (Nat.ltb_lt y n) Hx).
        apply lookup_extend_eq.
      - apply Nat.eqb_neq in E. destruct (Nat.ltb y n); auto.
        apply lookup_extend_neq. exact E.
    Qed.

    Lemma rel_bind_f : forall Θ Φ σ ψ F f,
      rel Θ Φ σ ψ -> F < m -> rel Θ (extend F f Φ) σ (upd ψ F f).
    Proof.
      intros Θ Φ σ ψ F f [Hs Hf] HF. split; auto. intros y.
      rewrite fsub_root. unfold upd. rewrite <- Hf, fsub_root.
      destruct (Nat.eqb F y) eqn:E.
      - apply Nat.eqb_eq in E. subst. rewrite (proj2 (Nat.ltb_lt y m) HF).
        apply lookup_extend_eq.
      - apply Nat.eqb_neq in E. destruct (Nat.ltb y m); auto.
        apply lookup_extend_neq. exact E.
    Qed.

    Lemma eval_guard_ext : forall σ σ' ψ ψ' g,
      (forall x, σ x = σ' x) -> (forall F, ψ F = ψ' F) ->
      eval_guard G σ ψ g = eval_guard G σ' ψ' g.
    Proof.
      intros σ σ' ψ ψ' g Hs Hf.
      assert (E1 : ext σ σ') by (intros x v H; rewrite <- Hs; exact H).
      assert (E2 : ext σ' σ) by (intros x v H; rewrite Hs; exact H).
      assert (E3 : ext ψ ψ') by (intros x v H; rewrite <- Hf; exact H).
      assert (E4 : ext ψ' ψ) by (intros x v H; rewrite Hf; exact H).
      destruct (eval_guard G σ ψ g) as [b|] eqn:E.
      - symmetry. eapply eval_guard_mono; eauto.
      - destruct (eval_guard G σ' ψ' g) as [b|] eqn:E'; auto.
        eapply eval_guard_mono in E'; eauto. congruence.
    Qed.

    Lemma map_items : forall ps ts k,
      map to_action (items ps ts k) = push_matches ps ts ρ0 (map to_action k).
    Proof.
      induction ps as [|p ps IH]; intros [|t ts] k; simpl; auto. rewrite IH. reflexivity.
    Qed.

    Lemma Forall_items : forall ps ts k,
      forallb (in_frag n m) ps = true -> Forall item_ok k -> Forall item_ok (items ps ts k).
    Proof.
      induction ps as [|p ps IH]; intros [|t ts] k Hp Hk; simpl in *; auto.
      apply andb_prop in Hp. destruct Hp. constructor; auto.
    Qed.

    Ltac step_to st := apply step_first_out with (st' := st).

    Theorem ksols_behaves : forall σ ψ k L, ksols σ ψ k L -> behaves σ ψ k L.
    Proof.
      induction 1; intros Θ Φ nf stk Hr Hk; simpl map;
        destruct Hr as [Hs Hf].
      - (* [] *) simpl. exists Θ, Φ. split; [|split; auto].
        eapply star_step; [apply ST_Success | apply star_refl].
      - (* x bound *) step_to (Running Θ Φ nf stk (map to_action k)).
        + apply ST_Match_Var_Bound. rewrite Hs. exact H.
        + inversion Hk; subst. apply IHksols; auto. split; auto.
      - (* x conflict *) simpl. eapply star_step; [|apply star_refl].
        apply ST_Match_Var_Conflict. right. exists t'. rewrite Hs. auto.
      - (* x bind *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        apply Nat.ltb_lt in Hi.
        step_to (Running (extend x t Θ) Φ nf stk (map to_action k)).
        + apply ST_Match_Var_Bind with (s := x).
          * unfold ρ0, root_env. simpl. rewrite vfind_ident_map.
            rewrite (proj2 (Nat.ltb_lt x n) Hi). reflexivity.
          * specialize (Hs x). rewrite tsub_root, (proj2 (Nat.ltb_lt x n) Hi) in Hs.
            congruence.
        + apply IHksols; auto. apply rel_bind_t; auto. split; auto.
      - (* f(ps) *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        step_to (Running Θ Φ nf stk (push_matches ps (children G t) ρ0 (map to_action k))).
        + apply ST_Match_Fun; auto.
        + rewrite <- map_items. apply IHksols; [split; auto|]. apply Forall_items; auto.
      - (* f(ps) conflict *) simpl. eapply star_step; [|apply star_refl].
        apply ST_Match_Fun_Conflict. exact H.
      - (* p1 ‖ p2 *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        apply andb_prop in Hi. destruct Hi as [Hi1 Hi2].
        step_to (Running Θ Φ nf ((Θ, Φ, AMatch p2 t ρ0 :: map to_action k) :: stk)
                         (AMatch p1 t ρ0 :: map to_action k)).
        + apply ST_Match_Alt.
        + specialize (IHksols1 Θ Φ nf ((Θ, Φ, AMatch p2 t ρ0 :: map to_action k) :: stk)
                        (conj Hs Hf) (Forall_cons (IMatch p1 t) (Hi1 : item_ok (IMatch p1 t)) Hk')).
          destruct L1 as [|[σ1 ψ1] L1]; simpl in IHksols1 |- *.
          * eapply star_first_out; [exact IHksols1|].
            apply IHksols2; [split; auto | constructor; auto].
          * exact IHksols1.
      - (* guard *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        step_to (Running Θ Φ nf stk (AMatch p t ρ0 :: AGuard g ρ0 :: map to_action k)).
        + apply ST_Match_Guard.
        + apply (IHksols Θ Φ nf stk); [split; auto|]. repeat constructor; auto.
      - (* guard true *) inversion Hk as [|? ? Hi Hk']; subst.
        step_to (Running Θ Φ nf stk (map to_action k)).
        + apply ST_CheckGuard_Continue. rewrite <- H. apply eval_guard_ext; auto.
        + apply IHksols; auto. split; auto.
      - (* guard false *) simpl. eapply star_step; [|apply star_refl].
        apply ST_CheckGuard_Backtrack. erewrite eval_guard_ext; eauto.
      - (* p ; (p' ≈ x) *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        apply andb_prop in Hi. destruct Hi as [Hi1 Hi2].
        step_to (Running Θ Φ nf stk (AMatch p t ρ0 :: AMatchConstr p' x ρ0 :: map to_action k)).
        + apply ST_Match_MatchConstr.
        + apply (IHksols Θ Φ nf stk); [split; auto|]. repeat constructor; auto.
      - (* constraint, x bound *) inversion Hk as [|? ? Hi Hk']; subst.
        step_to (Running Θ Φ nf stk (AMatch p t ρ0 :: map to_action k)).
        + apply ST_MatchConstr. rewrite Hs. exact H.
        + apply (IHksols Θ Φ nf stk); [split; auto|]. constructor; auto.
      - (* constraint, x unbound *) simpl. eapply star_step; [|apply star_refl].
        apply ST_MatchConstr_Backtrack. rewrite Hs. exact H.
      - (* F(ps) bound *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        apply andb_prop in Hi. destruct Hi as [_ Hi].
        step_to (Running Θ Φ nf stk (push_matches ps (children G t) ρ0 (map to_action k))).
        + apply ST_Match_FunVar_Bound; auto. rewrite Hf. exact H.
        + rewrite <- map_items. apply IHksols; [split; auto|]. apply Forall_items; auto.
      - (* F(ps) conflict *) simpl. eapply star_step; [|apply star_refl].
        apply ST_Match_FunVar_Conflict. destruct H as [[f [H1 H2]]|H]; auto.
        right. left. exists f. rewrite Hf. auto.
      - (* F(ps) bind *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        apply andb_prop in Hi. destruct Hi as [HF Hi]. apply Nat.ltb_lt in HF.
        step_to (Running Θ (extend F (label G t) Φ) nf stk
                   (push_matches ps (children G t) ρ0 (map to_action k))).
        + apply ST_Match_FunVar_Bind with (s := F); auto.
          * unfold ρ0, root_env. simpl. rewrite vfind_ident_map.
            rewrite (proj2 (Nat.ltb_lt F m) HF). reflexivity.
          * specialize (Hf F). rewrite fsub_root, (proj2 (Nat.ltb_lt F m) HF) in Hf.
            rewrite Hf. exact H.
        + rewrite <- map_items. apply IHksols; [|apply Forall_items; auto].
          apply rel_bind_f; auto. split; auto.
    Qed.
  End Machine.

  (** ** The machine's answer is the first solution *)

  Definition none_t : tsubst := fun _ => None.
  Definition none_f : fsubst := fun _ => None.

  Lemma star_terminal_det : forall st st1 st2,
    star G D st st1 -> star G D st st2 ->
    (forall st', ~ step G D st1 st') -> (forall st', ~ step G D st2 st') -> st1 = st2.
  Proof.
    intros st st1 st2 H1. revert st2. induction H1 as [st|st sa st1 Hs Hr IH];
      intros st2 H2 T1 T2.
    - destruct H2 as [|st sb st2 Hs2 _]; auto. exfalso. eapply T1; eauto.
    - destruct H2 as [|st sb st2 Hs2 Hr2].
      + exfalso. eapply T2; eauto.
      + apply step_deterministic_fn in Hs, Hs2. subst. apply IH; auto.
  Qed.

  Lemma success_terminal : forall Θ Φ st, ~ step G D (Success Θ Φ) st.
  Proof. intros Θ Φ st H. inversion H. Qed.

  Lemma failure_terminal : forall st, ~ step G D Failure st.
  Proof. intros st H. inversion H. Qed.

  Lemma flat_map_single : forall A (l : list A), flat_map (fun a => [a]) l = l.
  Proof. induction l; simpl; f_equal; auto. Qed.

  Lemma init_first_out : forall n m p t,
    in_frag n m p = true ->
    first_out n m (solutions none_t none_f p t) (init n m p t) (max n m) [].
  Proof.
    intros n m p t Hf.
    assert (Hk : ksols none_t none_f [IMatch p t]
                   (flat_map (fun s => [s]) (solutions none_t none_f p t))).
    { apply (ksols_solutions n m p Hf none_t none_f t [] (fun s => [s])).
      intros. apply K_Nil. }
    rewrite flat_map_single in Hk.
    apply (ksols_behaves n m _ _ _ _ Hk empty empty (max n m) []).
    - split; intros; rewrite ?tsub_root, ?fsub_root, lookup_empty;
        destruct (Nat.ltb _ _); reflexivity.
    - constructor; [exact Hf | constructor].
  Qed.

  (** Which answer: for a pattern of the fragment, [match_pattern]'s
      success is the first element of [solutions] (read through the root's
      scope), and its failure means [solutions] is empty. *)
  Theorem first_solution : forall fuel n m p t,
    in_frag n m p = true ->
    (forall Θ Φ, match_pattern G D fuel n m p t = OSuccess Θ Φ ->
       exists σ ψ L, solutions none_t none_f p t = (σ, ψ) :: L /\
         (forall x, tsub Θ (root_env n m) x = σ x) /\
         (forall F, fsub Φ (root_env n m) F = ψ F)) /\
    (match_pattern G D fuel n m p t = OFailure -> solutions none_t none_f p t = []).
  Proof.
    intros fuel n m p t Hf. pose proof (init_first_out n m p t Hf) as H.
    split.
    - intros Θ Φ Hm. apply run_refines_success in Hm.
      destruct (solutions none_t none_f p t) as [|[σ ψ] L]; simpl in H.
      + exfalso. assert (E : Success Θ Φ = Failure)
          by (eapply star_terminal_det; eauto using success_terminal, failure_terminal).
        discriminate.
      + destruct H as (Θ' & Φ' & Hs & [H1 H2]).
        assert (E : Success Θ Φ = Success Θ' Φ')
          by (eapply star_terminal_det; eauto using success_terminal).
        inversion E; subst. exists σ, ψ, L. auto.
    - intros Hm. apply run_refines_failure in Hm.
      destruct (solutions none_t none_f p t) as [|[σ ψ] L]; auto. simpl in H.
      destruct H as (Θ' & Φ' & Hs & _). exfalso.
      assert (E : Failure = Success Θ' Φ')
        by (eapply star_terminal_det; eauto using success_terminal, failure_terminal).
      discriminate.
  Qed.

  (** Conversely, with enough fuel the machine returns the first solution,
      and it answers [OFailure] when there is none. *)
  Theorem first_solution_complete : forall n m p t,
    in_frag n m p = true ->
    (forall σ ψ L, solutions none_t none_f p t = (σ, ψ) :: L ->
       exists fuel Θ Φ, match_pattern G D fuel n m p t = OSuccess Θ Φ /\
         (forall x, tsub Θ (root_env n m) x = σ x) /\
         (forall F, fsub Φ (root_env n m) F = ψ F)) /\
    (solutions none_t none_f p t = [] ->
       exists fuel, match_pattern G D fuel n m p t = OFailure).
  Proof.
    intros n m p t Hf. pose proof (init_first_out n m p t Hf) as H. split.
    - intros σ ψ L E. rewrite E in H. simpl in H.
      destruct H as (Θ & Φ & Hs & [H1 H2]).
      destruct (proj1 (run_complete G D _ _ Hs) Θ Φ eq_refl) as [fuel Hr].
      exists fuel, Θ, Φ. auto.
    - intros E. rewrite E in H. simpl in H.
      destruct (proj2 (run_complete G D _ _ H) eq_refl) as [fuel Hr].
      exists fuel. exact Hr.
  Qed.
  (** ** Every solution is a declarative match *)

  Lemma ext_trans : forall A (σ1 σ2 σ3 : nat -> option A), ext σ1 σ2 -> ext σ2 σ3 -> ext σ1 σ3.
  Proof. unfold ext. auto. Qed.

  Lemma ext_upd_none : forall A (σ : nat -> option A) x v, σ x = None -> ext σ (upd σ x v).
  Proof.
    unfold ext, upd. intros A σ x v H y w Hy. destruct (Nat.eqb x y) eqn:E; auto.
    apply Nat.eqb_eq in E. subst. congruence.
  Qed.

  Definition SP (p : pattern) : Prop :=
    forall σ ψ t s, In s (solutions σ ψ p t) ->
      matches G D (fst s) (snd s) p t /\ ext σ (fst s) /\ ext ψ (snd s).

  Lemma solutions_list_sound : forall ps, Forall SP ps ->
    forall σ ψ ts s, In s (solutions_list σ ψ ps ts) ->
      matches_list G D (fst s) (snd s) ps ts /\ ext σ (fst s) /\ ext ψ (snd s).
  Proof.
    induction 1 as [|q ps Hq Hps IH]; intros σ ψ ts s Hs; destruct ts as [|u ts];
      simpl in Hs; try contradiction.
    - destruct Hs as [<-|[]]. simpl. repeat split; try apply ML_Nil; apply ext_refl.
    - apply in_flat_map in Hs. destruct Hs as [s1 [H1 H2]].
      destruct (Hq _ _ _ _ H1) as (M1 & E1 & F1).
      destruct (IH _ _ _ _ H2) as (M2 & E2 & F2).
      repeat split; [|eapply ext_trans; eauto ..].
      apply ML_Cons; auto. eapply match_weakening; eauto.
  Qed.

  Theorem solutions_sound : forall p σ ψ t σ' ψ',
    In (σ', ψ') (solutions σ ψ p t) ->
    matches G D σ' ψ' p t /\ ext σ σ' /\ ext ψ ψ'.
  Proof.
    intros p σ ψ t σ' ψ' H.
    assert (Hp : forall q, SP q).
    { clear. intros p. induction p as [x|f ps Hps|p1 p2 IHp1 IHp2|p g IHp|x p IHp|F p IHp
                     |p p' x IHp1 IHp2|F ps Hps|Q xs Fs] using pattern_ind';
        intros σ0 ψ0 t0 s Hs; simpl in Hs.
      - destruct (σ0 x) as [t'|] eqn:Hx.
        + destruct (Nat.eqb t' t0) eqn:E; [|contradiction].
          apply Nat.eqb_eq in E. subst. destruct Hs as [<-|[]]. simpl.
          repeat split; try apply ext_refl. apply P_Var. exact Hx.
        + destruct Hs as [<-|[]]. simpl. repeat split; try apply ext_refl.
          * apply P_Var. unfold upd. rewrite Nat.eqb_refl. reflexivity.
          * apply ext_upd_none. exact Hx.
      - destruct (Nat.eqb (label G t0) f) eqn:E; [|contradiction].
        apply Nat.eqb_eq in E.
        destruct (solutions_list_sound ps Hps σ0 ψ0 (children G t0) s Hs) as (M & E1 & F1).
        repeat split; auto. apply P_Fun; auto.
      - apply in_app_or in Hs. destruct Hs as [Hs|Hs].
        + destruct (IHp1 _ _ _ _ Hs) as (M & E1 & F1). repeat split; auto.
          apply P_Alt1. exact M.
        + destruct (IHp2 _ _ _ _ Hs) as (M & E1 & F1). repeat split; auto.
          apply P_Alt2. exact M.
      - apply filter_In in Hs. destruct Hs as [Hs Hg].
        destruct (IHp _ _ _ _ Hs) as (M & E1 & F1). repeat split; auto.
        apply P_Guard; auto. unfold guard_ok in Hg.
        destruct (eval_guard G (fst s) (snd s) g) as [[|]|]; congruence.
      - contradiction.
      - contradiction.
      - apply in_flat_map in Hs. destruct Hs as [s1 [H1 H2]].
        destruct (IHp1 _ _ _ _ H1) as (M1 & E1 & F1).
        destruct (fst s1 x) as [t'|] eqn:Hx; [|contradiction].
        destruct (IHp2 _ _ _ _ H2) as (M2 & E2 & F2).
        repeat split; [|eapply ext_trans; eauto ..].
        eapply P_MatchConstr; eauto. eapply match_weakening; eauto.
      - destruct (ψ0 F) as [f|] eqn:HF.
        + destruct (Nat.eqb f (label G t0)) eqn:E; [|contradiction].
          apply Nat.eqb_eq in E. subst.
          destruct (solutions_list_sound ps Hps σ0 ψ0 (children G t0) s Hs) as (M & E1 & F1).
          repeat split; auto. apply P_FunVar; auto.
        + destruct (solutions_list_sound ps Hps σ0 (upd ψ0 F (label G t0)) (children G t0) s Hs)
            as (M & E1 & F1).
          repeat split; auto.
          * apply P_FunVar; auto. apply F1. unfold upd. rewrite Nat.eqb_refl. reflexivity.
          * eapply ext_trans; [apply ext_upd_none; exact HF | exact F1].
      - contradiction. }
    exact (Hp p σ ψ t (σ', ψ') H).
  Qed.
End Priority.

(** ** Which answer the library gives ([match_root], the function behind
    [pypm_match] and every entry of [pypm_match_all]): for a root
    definition whose body is in the fragment, the bindings [m.bindings]
    are the first solution, and "no match" means there is none. *)
Section RootPriority.
  Variable G : graph.
  Variable D : list pdef.

  Theorem match_root_first : forall fuel r t d bs fbs,
    nth_error D r = Some d -> in_frag (nparams d) (nfparams d) (body d) = true ->
    match_root G D fuel r t = RMatch bs fbs ->
    exists σ ψ L, solutions G none_t none_f (body d) t = (σ, ψ) :: L /\
      (forall x, assoc bs x = σ x) /\ (forall F, assoc fbs F = ψ F).
  Proof.
    intros fuel r t d bs fbs Hd Hf H. unfold match_root in H. rewrite Hd in H.
    destruct (admits _ _ _); [|discriminate].
    destruct (match_pattern G D fuel (nparams d) (nfparams d) (body d) t) as [Θ Φ| |]
      eqn:Hm; simpl in H; try discriminate.
    inversion H; subst.
    destruct (proj1 (first_solution G D fuel _ _ _ t Hf) Θ Φ Hm)
      as (σ & ψ & L & E & H1 & H2).
    exists σ, ψ, L. split; auto. split.
    - intros x. rewrite assoc_project, <- H1. reflexivity.
    - intros F. rewrite assoc_project, <- H2. reflexivity.
  Qed.

  Theorem match_root_none_first : forall fuel r t d,
    nth_error D r = Some d -> in_frag (nparams d) (nfparams d) (body d) = true ->
    match_root G D fuel r t = RNoMatch ->
    solutions G none_t none_f (body d) t = [].
  Proof.
    intros fuel r t d Hd Hf H. unfold match_root in H. rewrite Hd in H.
    destruct (admits G t (ri_find (root_index D) r)) eqn:Hi.
    - destruct (match_pattern G D fuel (nparams d) (nfparams d) (body d) t) eqn:Hm;
        simpl in H; try discriminate.
      exact (proj2 (first_solution G D fuel _ _ _ t Hf) Hm).
    - destruct (solutions G none_t none_f (body d) t) as [|[σ ψ] L] eqn:E; auto.
      exfalso. assert (Hin : In (σ, ψ) (solutions G none_t none_f (body d) t))
        by (rewrite E; left; reflexivity).
      destruct (solutions_sound G D _ _ _ _ _ _ Hin) as [Hm _].
      eapply root_index_no_match; eauto.
  Qed.
End RootPriority.

(** ** The whole calculus: calls and [∃] *)

(** A partial list: the solutions known within a call depth, in order.
    [PCut] stands where a call would unfold past the depth bound: nothing
    after it is known (the machine, a depth-first search, does not get past
    an unfinished branch). *)
Inductive plist (A : Type) :=
| PNil
| PCut
| PCons (a : A) (l : plist A).
Arguments PNil {A}.
Arguments PCut {A}.
Arguments PCons {A} a l.

Fixpoint papp {A} (l1 l2 : plist A) : plist A :=
  match l1 with
  | PNil => l2
  | PCut => PCut
  | PCons a l => PCons a (papp l l2)
  end.

Fixpoint pbind {A B} (l : plist A) (f : A -> plist B) : plist B :=
  match l with
  | PNil => PNil
  | PCut => PCut
  | PCons a l' => papp (f a) (pbind l' f)
  end.

Definition pret {A} (a : A) : plist A := PCons a PNil.

Fixpoint pmap {A B} (f : A -> B) (l : plist A) : plist B :=
  match l with
  | PNil => PNil
  | PCut => PCut
  | PCons a l' => PCons (f a) (pmap f l')
  end.

Fixpoint pIn {A} (a : A) (l : plist A) : Prop :=
  match l with
  | PCons b l' => b = a \/ pIn a l'
  | _ => False
  end.

(** Reading a substitution over slots through a scope. *)
Definition rd {A} (Θ : nat -> option A) (m : vmap) (x : nat) : option A :=
  match vfind x m with Some s => Θ s | None => None end.

(** Slot [s] dropped. *)
Definition clr {A} (Θ : nat -> option A) (s : nat) : nat -> option A :=
  fun y => if Nat.eqb s y then None else Θ y.

Lemma papp_nil_r : forall A (l : plist A), papp l PNil = l.
Proof. induction l; simpl; f_equal; auto. Qed.

Lemma papp_assoc : forall A (l1 l2 l3 : plist A),
  papp (papp l1 l2) l3 = papp l1 (papp l2 l3).
Proof. induction l1; simpl; intros; f_equal; auto. Qed.

Lemma pbind_papp : forall A B (l1 l2 : plist A) (f : A -> plist B),
  pbind (papp l1 l2) f = papp (pbind l1 f) (pbind l2 f).
Proof. induction l1; simpl; intros; auto. rewrite IHl1, papp_assoc. reflexivity. Qed.

Lemma pbind_assoc : forall A B C (l : plist A) (f : A -> plist B) (g : B -> plist C),
  pbind (pbind l f) g = pbind l (fun a => pbind (f a) g).
Proof. induction l; simpl; intros; auto. rewrite pbind_papp, IHl. reflexivity. Qed.

Lemma pbind_ret : forall A B (a : A) (f : A -> plist B), pbind (pret a) f = f a.
Proof. intros. simpl. apply papp_nil_r. Qed.

Lemma pbind_ret_r : forall A (l : plist A), pbind l pret = l.
Proof. induction l; simpl; auto. rewrite IHl. reflexivity. Qed.

Lemma pbind_ext : forall A B (l : plist A) (f g : A -> plist B),
  (forall a, f a = g a) -> pbind l f = pbind l g.
Proof. induction l; simpl; intros; auto. rewrite H, (IHl f g H). reflexivity. Qed.

Lemma pIn_papp : forall A (a : A) l1 l2, pIn a (papp l1 l2) -> pIn a l1 \/ pIn a l2.
Proof. induction l1; simpl; intros; auto; tauto || (destruct H; auto; apply IHl1 in H; tauto). Qed.

Lemma pIn_pbind : forall A B (b : B) (l : plist A) f,
  pIn b (pbind l f) -> exists a, pIn a l /\ pIn b (f a).
Proof.
  induction l as [| |a l IH]; simpl; intros f H; try contradiction.
  apply pIn_papp in H. destruct H as [H|H].
  - exists a. auto.
  - destruct (IH f H) as [a' [H1 H2]]. exists a'. auto.
Qed.

Section Whole.
  Variable G : graph.
  Variable D : list pdef.

  (** The list premise of P-FUN: the arguments left to right. *)
  Definition psols_list (rec : tsubst -> fsubst -> pattern -> node -> plist sol) :=
    fix go (Θ : tsubst) (Φ : fsubst) (ps : list pattern) (ts : list node) : plist sol :=
      match ps, ts with
      | [], [] => pret (Θ, Φ)
      | q :: ps', u :: ts' => pbind (rec Θ Φ q u) (fun s => go (fst s) (snd s) ps' ts')
      | _, _ => PNil
      end.

  (** [psols d B Θ Φ p t ρ]: the solutions of [p] at [t] in scope [ρ]
      from ⟨Θ, Φ⟩ (substitutions of slots), in order, calls unfolded at
      most [d] deep; [B] is the first slot no enclosing scope uses.
      - [x], [f(ps)], [p1 ‖ p2], guards, constraints, [F(ps)]: as
        [solutions], reading variables through [ρ];
      - [∃x.p]: [x] is slot [B], fresh (unbound in both substitutions);
        the solutions of [p] in [ρ + {x ↦ B}] (inner [∃]s from [B+1]) that
        bind [B], with [B] then dropped: the witness is hidden;
      - [P(xs)[Fs]]: past the depth, a cut; else the body of [P] in the
        scope whose parameter [i] is the caller's [xs_i] ([call_env]);
        a call the machine rejects (unknown [P], wrong arity) has no
        solution. *)
  Fixpoint psols (d : nat) : nat -> tsubst -> fsubst -> pattern -> node -> env -> plist sol :=
    fix go (B : nat) (Θ : tsubst) (Φ : fsubst) (p : pattern) (t : node) (ρ : env)
      {struct p} : plist sol :=
    match p with
    | PVar x =>
        match vfind x (tenv ρ) with
        | None => PNil
        | Some s =>
            match Θ s with
            | Some t' => if Nat.eqb t' t then pret (Θ, Φ) else PNil
            | None => pret (upd Θ s t, Φ)
            end
        end
    | PApp f ps =>
        if Nat.eqb (label G t) f && Nat.eqb (length ps) (length (children G t))
        then psols_list (fun Θ Φ q u => go B Θ Φ q u ρ) Θ Φ ps (children G t)
        else PNil
    | PAlt p1 p2 => papp (go B Θ Φ p1 t ρ) (go B Θ Φ p2 t ρ)
    | PGuard p g =>
        pbind (go B Θ Φ p t ρ) (fun s =>
          if guard_ok G (rd (fst s) (tenv ρ)) (rd (snd s) (fenv ρ)) g then pret s else PNil)
    | PExists x p =>
        pbind (go (S B) (clr Θ B) (clr Φ B) p t (env_add_t ρ x B)) (fun s =>
          match fst s B with
          | Some _ => pret (clr (fst s) B, snd s)
          | None => PNil
          end)
    | PExistsF F p =>
        pbind (go (S B) (clr Θ B) (clr Φ B) p t (env_add_f ρ F B)) (fun s =>
          match snd s B with
          | Some _ => pret (fst s, clr (snd s) B)
          | None => PNil
          end)
    | PConstr p p' x =>
        pbind (go B Θ Φ p t ρ) (fun s =>
          match rd (fst s) (tenv ρ) x with
          | Some t' => go B (fst s) (snd s) p' t' ρ
          | None => PNil
          end)
    | PFunVar F ps =>
        if Nat.eqb (length ps) (length (children G t)) then
          match vfind F (fenv ρ) with
          | None => PNil
          | Some s =>
              match Φ s with
              | Some f =>
                  if Nat.eqb f (label G t)
                  then psols_list (fun Θ Φ q u => go B Θ Φ q u ρ) Θ Φ ps (children G t)
                  else PNil
              | None =>
                  psols_list (fun Θ Φ q u => go B Θ Φ q u ρ) Θ (upd Φ s (label G t))
                    ps (children G t)
              end
          end
        else PNil
    | PCall P xs Fs =>
        match d with
        | O => PCut
        | S d' =>
            match nth_error D P with
            | Some dd =>
                if Nat.eqb (length xs) (nparams dd) && Nat.eqb (length Fs) (nfparams dd)
                then psols d' B Θ Φ (body dd) t (call_env ρ xs Fs)
                else PNil
            | None => PNil
            end
        end
    end.

  (** At the root: the solutions read through the root's scope. *)
  Definition solutions_k (K n m : nat) (p : pattern) (t : node) : plist sol :=
    pmap (fun s => (rd (fst s) (ident_map n), rd (snd s) (ident_map m)))
      (psols K (max n m) none_t none_f p t (root_env n m)).
End Whole.

(** ** The machine follows [psols] *)

(** Pending work of the specification: as the machine's actions, with
    scopes over the specification's slots, and the depth left. [WCheck s]
    ends an [∃x]: slot [s] must be bound, and is dropped. *)
Inductive witem :=
| WMatch (p : pattern) (t : node) (ρ : env) (d : nat)
| WGuard (g : guard) (ρ : env)
| WConstr (p : pattern) (x : var) (ρ : env) (d : nat)
| WCheck (s : nat)
| WCheckF (s : nat).

Fixpoint witems (ps : list pattern) (ts : list node) (ρ : env) (d : nat) (k : list witem)
  : list witem :=
  match ps, ts with
  | p :: ps', t :: ts' => WMatch p t ρ d :: witems ps' ts' ρ d k
  | _, _ => k
  end.

Section MachineW.
  Variable G : graph.
  Variable D : list pdef.
  (** The root's slots: [0 .. B0-1]. *)
  Variable B0 : nat.

  (** The machine's scope is the specification's, renamed by [r]. *)
  Definition env_rel (r : nat -> nat) (ρ ρm : env) : Prop :=
    (forall x, vfind x (tenv ρm) = option_map r (vfind x (tenv ρ))) /\
    (forall F, vfind F (fenv ρm) = option_map r (vfind F (fenv ρ))).

  Definition wrel (r : nat -> nat) (i : witem) (a : action) : Prop :=
    match i, a with
    | WMatch p t ρ _, AMatch p' t' ρm => p' = p /\ t' = t /\ env_rel r ρ ρm
    | WGuard g ρ, AGuard g' ρm => g' = g /\ env_rel r ρ ρm
    | WConstr p x ρ _, AMatchConstr p' x' ρm => p' = p /\ x' = x /\ env_rel r ρ ρm
    | WCheck s, ACheckName s' => s' = r s
    | WCheckF s, ACheckFName s' => s' = r s
    | _, _ => False
    end.

  (** Scopes: the items before the first [WCheck] use slots below [B]. *)
  Fixpoint wsc (B : nat) (k : list witem) : Prop :=
    match k with
    | [] => True
    | WMatch _ _ ρ _ :: k' | WGuard _ ρ :: k' | WConstr _ _ ρ _ :: k' =>
        env_below B ρ /\ wsc B k'
    | WCheck s :: k' | WCheckF s :: k' => S s = B /\ B0 <= s /\ wsc s k'
    end.

  (** Every item has depth at least [c] left. *)
  Fixpoint wbud (c : nat) (k : list witem) : Prop :=
    match k with
    | [] => True
    | WMatch _ _ _ d :: k' | WConstr _ _ _ d :: k' => c <= d /\ wbud c k'
    | _ :: k' => wbud c k'
    end.

  Definition wmrel (r : nat -> nat) (B : nat) (Θ : tsubst) (Φ : fsubst)
      (Θm Φm : subst) (nf : nat) : Prop :=
    (forall s, s < B -> lookup (r s) Θm = Θ s /\ lookup (r s) Φm = Φ s) /\
    (forall s1 s2, s1 < B -> s2 < B -> r s1 = r s2 -> s1 = s2) /\
    (forall s, s < B -> r s < nf) /\
    dom_below nf Θm /\ dom_below nf Φm /\
    (forall s, s < B0 -> r s = s) /\ B0 <= B.

  Definition wout (Θm Φm : subst) (Θ : tsubst) (Φ : fsubst) : Prop :=
    forall s, s < B0 -> lookup s Θm = Θ s /\ lookup s Φm = Φ s.

  Definition wfirst (c : nat) (L : plist sol) (st : state) (nf : nat) (stk : list frame)
    : Prop :=
    match L with
    | PNil => exists nf', nf <= nf' /\ star G D st (backtrack nf' stk)
    | PCut => run G D c st = OOutOfFuel
    | PCons (Θ, Φ) _ => exists Θm Φm, star G D st (Success Θm Φm) /\ wout Θm Φm Θ Φ
    end.

  Definition wbehaves (B : nat) (Θ : tsubst) (Φ : fsubst) (k : list witem) (L : plist sol)
    : Prop :=
    forall c r Θm Φm nf stk km,
      wbud c k -> wsc B k -> wmrel r B Θ Φ Θm Φm nf -> Forall2 (wrel r) k km ->
      wfirst c L (Running Θm Φm nf stk km) nf stk.

  (** *** Steps *)

  Lemma run_oof_pred : forall c st st',
    step G D st st' -> run G D (pred c) st' = OOutOfFuel -> run G D c st = OOutOfFuel.
  Proof.
    intros c st st' Hs H. pose proof (step_deterministic_fn G D _ _ Hs) as E.
    destruct st as [Θ Φ nf stk k| |]; try (inversion Hs; fail).
    destruct c as [|c]; cbn [run pred] in *; [reflexivity|]. rewrite E. exact H.
  Qed.

  Lemma run_oof_le : forall c c' st,
    c' <= c -> run G D c st = OOutOfFuel -> run G D c' st = OOutOfFuel.
  Proof.
    intros c c' st Hle H. destruct (run G D c' st) eqn:E; auto;
      rewrite (run_mono G D c' c st _ Hle E) in H; discriminate.
  Qed.

  Lemma wfirst_le : forall c c' L st nf stk,
    c' <= c -> wfirst c L st nf stk -> wfirst c' L st nf stk.
  Proof.
    intros c c' [| |[Θ Φ] L] st nf stk Hle H; simpl in *; auto.
    eapply run_oof_le; eauto.
  Qed.

  Lemma wfirst_step_pred : forall c L st st' nf stk,
    step G D st st' -> wfirst (pred c) L st' nf stk -> wfirst c L st nf stk.
  Proof.
    intros c [| |[Θ Φ] L] st st' nf stk Hs H; simpl in *.
    - destruct H as (nf' & Hle & H). exists nf'. split; auto. eapply star_step; eauto.
    - eapply run_oof_pred; eauto.
    - destruct H as (Θm & Φm & H1 & H2). exists Θm, Φm. split; auto.
      eapply star_step; eauto.
  Qed.

  Lemma wfirst_step : forall c L st st' nf stk,
    step G D st st' -> wfirst c L st' nf stk -> wfirst c L st nf stk.
  Proof.
    intros. eapply wfirst_step_pred; eauto. eapply wfirst_le; [|eauto]. lia.
  Qed.

  Lemma wfirst_star : forall c L st st' nf stk,
    star G D st st' -> wfirst c L st' nf stk -> wfirst c L st nf stk.
  Proof.
    intros c L st st' nf stk H. induction H; auto. intros. eapply wfirst_step; eauto.
  Qed.

  Lemma wfirst_nf : forall c L st nf nf' stk,
    nf <= nf' -> wfirst c L st nf' stk -> wfirst c L st nf stk.
  Proof.
    intros c [| |[Θ Φ] L] st nf nf' stk Hle H; simpl in *; auto.
    destruct H as (nf'' & H1 & H2). exists nf''. split; [lia | auto].
  Qed.

  Lemma wfirst_backtrack : forall c st nf stk,
    step G D st (backtrack nf stk) -> wfirst c PNil st nf stk.
  Proof.
    intros. exists nf. split; auto. eapply star_step; [eauto | apply star_refl].
  Qed.

  (** *** The relation *)

  Ltac split7 := refine (conj _ (conj _ (conj _ (conj _ (conj _ (conj _ _)))))).

  Lemma wmrel_nf : forall r B Θ Φ Θm Φm nf nf',
    nf <= nf' -> wmrel r B Θ Φ Θm Φm nf -> wmrel r B Θ Φ Θm Φm nf'.
  Proof.
    intros r B Θ Φ Θm Φm nf nf' Hle (H1 & H2 & H3 & H4 & H5 & H6 & H7).
    split7; auto.
    - intros s Hs. specialize (H3 s Hs). lia.
    - intros g v Hg. apply H4 in Hg. lia.
    - intros g v Hg. apply H5 in Hg. lia.
  Qed.

  Lemma rd_tsub : forall r B Θ Φ Θm Φm nf ρ ρm,
    wmrel r B Θ Φ Θm Φm nf -> env_rel r ρ ρm -> env_below B ρ ->
    forall x, tsub Θm ρm x = rd Θ (tenv ρ) x.
  Proof.
    intros r B Θ Φ Θm Φm nf ρ ρm Hr [Ht _] [Hb _] x. unfold tsub, gsub, rd.
    rewrite Ht. destruct (vfind x (tenv ρ)) as [s|] eqn:E; simpl; auto.
    apply (proj1 Hr). eapply Hb. eauto.
  Qed.

  Lemma rd_fsub : forall r B Θ Φ Θm Φm nf ρ ρm,
    wmrel r B Θ Φ Θm Φm nf -> env_rel r ρ ρm -> env_below B ρ ->
    forall F, fsub Φm ρm F = rd Φ (fenv ρ) F.
  Proof.
    intros r B Θ Φ Θm Φm nf ρ ρm Hr [_ Hf] [_ Hb] x. unfold fsub, gsub, rd.
    rewrite Hf. destruct (vfind x (fenv ρ)) as [s|] eqn:E; simpl; auto.
    apply (proj1 Hr). eapply Hb. eauto.
  Qed.

  Lemma wmrel_bind_t : forall r B Θ Φ Θm Φm nf s t,
    wmrel r B Θ Φ Θm Φm nf -> s < B ->
    wmrel r B (upd Θ s t) Φ (extend (r s) t Θm) Φm nf.
  Proof.
    intros r B Θ Φ Θm Φm nf s t (H1 & H2 & H3 & H4 & H5 & H6 & H7) Hs.
    split7; auto.
    - intros s' Hs'. split; [|apply H1; auto]. unfold upd. destruct (Nat.eqb s s') eqn:E.
      + apply Nat.eqb_eq in E. subst. apply lookup_extend_eq.
      + apply Nat.eqb_neq in E. rewrite lookup_extend_neq; [apply H1; auto|].
        intros He. apply E. apply H2; auto.
    - intros g v Hg. destruct (Nat.eq_dec (r s) g) as [<-|Hne].
      + apply H3. auto.
      + rewrite lookup_extend_neq in Hg by exact Hne. eapply H4; eauto.
  Qed.

  Lemma wmrel_bind_f : forall r B Θ Φ Θm Φm nf s f,
    wmrel r B Θ Φ Θm Φm nf -> s < B ->
    wmrel r B Θ (upd Φ s f) Θm (extend (r s) f Φm) nf.
  Proof.
    intros r B Θ Φ Θm Φm nf s f (H1 & H2 & H3 & H4 & H5 & H6 & H7) Hs.
    split7; auto.
    - intros s' Hs'. split; [apply H1; auto|]. unfold upd. destruct (Nat.eqb s s') eqn:E.
      + apply Nat.eqb_eq in E. subst. apply lookup_extend_eq.
      + apply Nat.eqb_neq in E. rewrite lookup_extend_neq; [apply H1; auto|].
        intros He. apply E. apply H2; auto.
    - intros g v Hg. destruct (Nat.eq_dec (r s) g) as [<-|Hne].
      + apply H3. auto.
      + rewrite lookup_extend_neq in Hg by exact Hne. eapply H5; eauto.
  Qed.

  Definition ralloc (r : nat -> nat) (B nf : nat) : nat -> nat :=
    fun s => if Nat.eqb s B then nf else r s.

  Lemma wmrel_alloc : forall r B Θ Φ Θm Φm nf,
    wmrel r B Θ Φ Θm Φm nf ->
    wmrel (ralloc r B nf) (S B) (clr Θ B) (clr Φ B) Θm Φm (S nf).
  Proof.
    intros r B Θ Φ Θm Φm nf (H1 & H2 & H3 & H4 & H5 & H6 & H7).
    unfold ralloc, clr. split7.
    - intros s Hs. destruct (Nat.eqb s B) eqn:E.
      + apply Nat.eqb_eq in E. subst. rewrite Nat.eqb_refl.
        destruct (lookup nf Θm) eqn:L; [apply H4 in L; lia|].
        destruct (lookup nf Φm) eqn:L'; [apply H5 in L'; lia|]. auto.
      + apply Nat.eqb_neq in E. rewrite (proj2 (Nat.eqb_neq B s)) by auto.
        apply H1. lia.
    - intros s1 s2 Hs1 Hs2 He.
      destruct (Nat.eqb s1 B) eqn:E1; destruct (Nat.eqb s2 B) eqn:E2.
      + apply Nat.eqb_eq in E1, E2. lia.
      + apply Nat.eqb_neq in E2. assert (s2 < B) by lia. specialize (H3 s2 H). lia.
      + apply Nat.eqb_neq in E1. assert (s1 < B) by lia. specialize (H3 s1 H). lia.
      + apply Nat.eqb_neq in E1, E2. apply H2; auto; lia.
    - intros s Hs. destruct (Nat.eqb s B) eqn:E; [lia|].
      apply Nat.eqb_neq in E. specialize (H3 s ltac:(lia)). lia.
    - intros g v Hg. apply H4 in Hg. lia.
    - intros g v Hg. apply H5 in Hg. lia.
    - intros s Hs. destruct (Nat.eqb s B) eqn:E; [apply Nat.eqb_eq in E; lia|]. auto.
    - lia.
  Qed.

  Lemma wmrel_drop_t : forall r B Θ Φ Θm Φm nf,
    wmrel r (S B) Θ Φ Θm Φm nf -> B0 <= B -> wmrel r B (clr Θ B) Φ Θm Φm nf.
  Proof.
    intros r B Θ Φ Θm Φm nf (H1 & H2 & H3 & H4 & H5 & H6 & H7) HB.
    unfold clr. split7.
    - intros s Hs. rewrite (proj2 (Nat.eqb_neq B s)) by lia. apply H1. lia.
    - intros s1 s2 ? ?. apply H2; lia.
    - intros s Hs. apply H3. lia.
    - exact H4.
    - exact H5.
    - exact H6.
    - exact HB.
  Qed.

  Lemma wmrel_drop_f : forall r B Θ Φ Θm Φm nf,
    wmrel r (S B) Θ Φ Θm Φm nf -> B0 <= B -> wmrel r B Θ (clr Φ B) Θm Φm nf.
  Proof.
    intros r B Θ Φ Θm Φm nf (H1 & H2 & H3 & H4 & H5 & H6 & H7) HB.
    unfold clr. split7.
    - intros s Hs. rewrite (proj2 (Nat.eqb_neq B s)) by lia. apply H1. lia.
    - intros s1 s2 ? ?. apply H2; lia.
    - intros s Hs. apply H3. lia.
    - exact H4.
    - exact H5.
    - exact H6.
    - exact HB.
  Qed.

  Lemma env_rel_agree : forall r r' B ρ ρm,
    env_rel r ρ ρm -> env_below B ρ -> (forall s, s < B -> r' s = r s) -> env_rel r' ρ ρm.
  Proof.
    intros r r' B ρ ρm [Ht Hf] [Bt Bf] Ha. split.
    - intros x. rewrite Ht. destruct (vfind x (tenv ρ)) eqn:E; simpl; auto.
      rewrite Ha; auto. eapply Bt; eauto.
    - intros x. rewrite Hf. destruct (vfind x (fenv ρ)) eqn:E; simpl; auto.
      rewrite Ha; auto. eapply Bf; eauto.
  Qed.

  Lemma wrel_agree : forall r r' k km B,
    Forall2 (wrel r) k km -> wsc B k -> (forall s, s < B -> r' s = r s) ->
    Forall2 (wrel r') k km.
  Proof.
    intros r r' k km B H. revert B. induction H as [|i a k km Ha Hk IH];
      intros B Hw Hag; constructor.
    - destruct i, a; simpl in *; try contradiction; simpl in Hw;
        repeat match goal with
        | H : _ /\ _ |- _ => destruct H
        end; subst; repeat split; auto; try (eapply env_rel_agree; eauto).
      + symmetry. apply Hag. lia.
      + symmetry. apply Hag. lia.
    - destruct i; simpl in Hw;
        first [ destruct Hw as [H1 H2]; eapply IH; [exact H2 | exact Hag]
              | destruct Hw as [H1 [H2 H3]]; eapply IH;
                [exact H3 | intros s' Hs'; apply Hag; lia] ].
  Qed.

  Lemma env_rel_add_t : forall r B nf ρ ρm x,
    env_rel r ρ ρm -> env_below B ρ ->
    env_rel (ralloc r B nf) (env_add_t ρ x B) (env_add_t ρm x nf).
  Proof.
    intros r B nf ρ ρm x Hr Hb.
    assert (Ha : forall s, s < B -> ralloc r B nf s = r s)
      by (intros s Hs; unfold ralloc; rewrite (proj2 (Nat.eqb_neq s B)) by lia; auto).
    destruct (env_rel_agree r (ralloc r B nf) B ρ ρm Hr Hb Ha) as [Ht Hf].
    split; simpl; auto. intros y. rewrite !vfind_add.
    destruct (Nat.eqb x y); simpl; auto. unfold ralloc. rewrite Nat.eqb_refl. auto.
  Qed.

  Lemma env_rel_add_f : forall r B nf ρ ρm F,
    env_rel r ρ ρm -> env_below B ρ ->
    env_rel (ralloc r B nf) (env_add_f ρ F B) (env_add_f ρm F nf).
  Proof.
    intros r B nf ρ ρm F Hr Hb.
    assert (Ha : forall s, s < B -> ralloc r B nf s = r s)
      by (intros s Hs; unfold ralloc; rewrite (proj2 (Nat.eqb_neq s B)) by lia; auto).
    destruct (env_rel_agree r (ralloc r B nf) B ρ ρm Hr Hb Ha) as [Ht Hf].
    split; simpl; auto. intros y. rewrite !vfind_add.
    destruct (Nat.eqb F y); simpl; auto. unfold ralloc. rewrite Nat.eqb_refl. auto.
  Qed.

  Lemma env_below_add_t : forall B ρ x, env_below B ρ -> env_below (S B) (env_add_t ρ x B).
  Proof.
    intros B ρ x [Ht Hf]. split; simpl.
    - intros y g Hy. rewrite vfind_add in Hy. destruct (Nat.eqb x y).
      + inversion Hy. lia.
      + apply Ht in Hy. lia.
    - intros y g Hy. apply Hf in Hy. lia.
  Qed.

  Lemma env_below_add_f : forall B ρ F, env_below B ρ -> env_below (S B) (env_add_f ρ F B).
  Proof.
    intros B ρ F [Ht Hf]. split; simpl.
    - intros y g Hy. apply Ht in Hy. lia.
    - intros y g Hy. rewrite vfind_add in Hy. destruct (Nat.eqb F y).
      + inversion Hy. lia.
      + apply Hf in Hy. lia.
  Qed.

  Lemma env_rel_call : forall r ρ ρm xs Fs,
    env_rel r ρ ρm -> env_rel r (call_env ρ xs Fs) (call_env ρm xs Fs).
  Proof.
    intros r ρ ρm xs Fs [Ht Hf]. split; simpl; intros y; rewrite !vfind_call_map;
      destruct (Nat.ltb y 0); auto; destruct (nth_error _ (y - 0)); auto.
  Qed.

  Lemma Forall2_witems : forall r ps ts ρ ρm d k km,
    env_rel r ρ ρm -> Forall2 (wrel r) k km ->
    Forall2 (wrel r) (witems ps ts ρ d k) (push_matches ps ts ρm km).
  Proof.
    induction ps as [|p ps IH]; intros [|t ts] ρ ρm d k km Hρ Hk; simpl; auto.
    constructor; auto. simpl. auto.
  Qed.

  Lemma wsc_witems : forall B ps ts ρ d k,
    env_below B ρ -> wsc B k -> wsc B (witems ps ts ρ d k).
  Proof.
    induction ps as [|p ps IH]; intros [|t ts] ρ d k Hρ Hk; simpl; auto.
  Qed.

  Lemma wbud_witems : forall c ps ts ρ d k,
    c <= d -> wbud c k -> wbud c (witems ps ts ρ d k).
  Proof.
    induction ps as [|p ps IH]; intros [|t ts] ρ d k Hc Hk; simpl; auto.
  Qed.

  Lemma wbud_le : forall c c' k, c' <= c -> wbud c k -> wbud c' k.
  Proof.
    induction k as [|i k IH]; intros Hle H; simpl in *; auto.
    destruct i; simpl in *; try (destruct H; split; [lia | auto]); auto.
  Qed.

  (** *** Unfolding [psols] *)

  Lemma psols_app : forall d B Θ Φ f ps t ρ,
    psols G D d B Θ Φ (PApp f ps) t ρ =
    if Nat.eqb (label G t) f && Nat.eqb (length ps) (length (children G t))
    then psols_list (fun Θ Φ q u => psols G D d B Θ Φ q u ρ) Θ Φ ps (children G t)
    else PNil.
  Proof. intros. destruct d; reflexivity. Qed.

  Lemma psols_funvar : forall d B Θ Φ F ps t ρ,
    psols G D d B Θ Φ (PFunVar F ps) t ρ =
    if Nat.eqb (length ps) (length (children G t)) then
      match vfind F (fenv ρ) with
      | None => PNil
      | Some s =>
          match Φ s with
          | Some f =>
              if Nat.eqb f (label G t)
              then psols_list (fun Θ Φ q u => psols G D d B Θ Φ q u ρ) Θ Φ ps (children G t)
              else PNil
          | None =>
              psols_list (fun Θ Φ q u => psols G D d B Θ Φ q u ρ) Θ (upd Φ s (label G t))
                ps (children G t)
          end
      end
    else PNil.
  Proof. intros. destruct d; reflexivity. Qed.

  Lemma psols_list_cons : forall (rec : tsubst -> fsubst -> pattern -> node -> plist sol)
      Θ Φ q ps u ts,
    psols_list rec Θ Φ (q :: ps) (u :: ts) =
    pbind (rec Θ Φ q u) (fun s => psols_list rec (fst s) (snd s) ps ts).
  Proof. reflexivity. Qed.

  (** *** Items other than a match *)

  Ltac inv_head Hk a Ha km' Hk' :=
    inversion Hk as [|? a ? km' Ha Hk']; subst; clear Hk.

  Lemma wbehaves_done : forall B Θ Φ, wbehaves B Θ Φ [] (pret (Θ, Φ)).
  Proof.
    intros B Θ Φ c r Θm Φm nf stk km _ _ Hr Hk. inversion Hk; subst. simpl.
    exists Θm, Φm. split.
    - eapply star_step; [apply ST_Success | apply star_refl].
    - destruct Hr as (H1 & _ & _ & _ & _ & H6 & H7). intros s Hs.
      pose proof (H1 s ltac:(lia)) as E. rewrite (H6 s Hs) in E. exact E.
  Qed.

  Lemma wbehaves_guard : forall B Θ Φ g ρ k L,
    wbehaves B Θ Φ k L ->
    wbehaves B Θ Φ (WGuard g ρ :: k)
      (if guard_ok G (rd Θ (tenv ρ)) (rd Φ (fenv ρ)) g then L else PNil).
  Proof.
    intros B Θ Φ g ρ k L HL c r Θm Φm nf stk km Hb Hw Hr Hk.
    inv_head Hk a Ha km' Hk'. destruct a as [|g' ρm| | |]; simpl in Ha; try contradiction.
    destruct Ha as [-> Hρ]. simpl in Hw, Hb. destruct Hw as [Hρb Hw].
    assert (E : eval_guard G (tsub Θm ρm) (fsub Φm ρm) g =
                eval_guard G (rd Θ (tenv ρ)) (rd Φ (fenv ρ)) g).
    { apply eval_guard_ext; intros; [eapply rd_tsub | eapply rd_fsub]; eauto. }
    unfold guard_ok. destruct (eval_guard G (rd Θ (tenv ρ)) (rd Φ (fenv ρ)) g) as [[|]|] eqn:Eg.
    - eapply wfirst_step; [apply ST_CheckGuard_Continue; exact E|].
      apply (HL c r); auto.
    - apply wfirst_backtrack. apply ST_CheckGuard_Backtrack. rewrite E. congruence.
    - apply wfirst_backtrack. apply ST_CheckGuard_Backtrack. rewrite E. congruence.
  Qed.

  Lemma wbehaves_check : forall B Θ Φ k L,
    wbehaves B (clr Θ B) Φ k L ->
    wbehaves (S B) Θ Φ (WCheck B :: k) (match Θ B with Some _ => L | None => PNil end).
  Proof.
    intros B Θ Φ k L HL c r Θm Φm nf stk km Hb Hw Hr Hk.
    inv_head Hk a Ha km' Hk'. destruct a; simpl in Ha; try contradiction. subst.
    simpl in Hw, Hb. destruct Hw as (_ & HB & Hw).
    assert (E : lookup (r B) Θm = Θ B) by (apply (proj1 Hr); lia).
    destruct (Θ B) as [v|] eqn:Ev.
    - eapply wfirst_step; [apply ST_CheckName; congruence|].
      apply (HL c r); auto. apply wmrel_drop_t; auto.
    - apply wfirst_backtrack. apply ST_CheckName_Backtrack. exact E.
  Qed.

  Lemma wbehaves_checkf : forall B Θ Φ k L,
    wbehaves B Θ (clr Φ B) k L ->
    wbehaves (S B) Θ Φ (WCheckF B :: k) (match Φ B with Some _ => L | None => PNil end).
  Proof.
    intros B Θ Φ k L HL c r Θm Φm nf stk km Hb Hw Hr Hk.
    inv_head Hk a Ha km' Hk'. destruct a; simpl in Ha; try contradiction. subst.
    simpl in Hw, Hb. destruct Hw as (_ & HB & Hw).
    assert (E : lookup (r B) Φm = Φ B) by (apply (proj1 Hr); lia).
    destruct (Φ B) as [v|] eqn:Ev.
    - eapply wfirst_step; [apply ST_CheckFName; congruence|].
      apply (HL c r); auto. apply wmrel_drop_f; auto.
    - apply wfirst_backtrack. apply ST_CheckFName_Backtrack. exact E.
  Qed.

  Lemma wbehaves_constr : forall B Θ Φ p x ρ d k (Lf : node -> plist sol),
    (forall t, wbehaves B Θ Φ (WMatch p t ρ d :: k) (Lf t)) ->
    wbehaves B Θ Φ (WConstr p x ρ d :: k)
      (match rd Θ (tenv ρ) x with Some t => Lf t | None => PNil end).
  Proof.
    intros B Θ Φ p x ρ d k Lf HL c r Θm Φm nf stk km Hb Hw Hr Hk.
    inv_head Hk a Ha km' Hk'. destruct a as [| |s|s|p' x' ρm]; simpl in Ha; try contradiction.
    destruct Ha as (-> & -> & Hρ). simpl in Hw, Hb. destruct Hw as [Hρb Hw].
    assert (E : tsub Θm ρm x = rd Θ (tenv ρ) x) by (eapply rd_tsub; eauto).
    destruct (rd Θ (tenv ρ) x) as [t|] eqn:Et.
    - eapply wfirst_step; [apply ST_MatchConstr; exact E|].
      apply (HL t c r); simpl; auto. constructor; auto. simpl. auto.
    - apply wfirst_backtrack. apply ST_MatchConstr_Backtrack. exact E.
  Qed.

  Lemma psols_var : forall d B Θ Φ x t ρ,
    psols G D d B Θ Φ (PVar x) t ρ =
    match vfind x (tenv ρ) with
    | None => PNil
    | Some s =>
        match Θ s with
        | Some t' => if Nat.eqb t' t then pret (Θ, Φ) else PNil
        | None => pret (upd Θ s t, Φ)
        end
    end.
  Proof. intros. destruct d; reflexivity. Qed.

  Lemma psols_alt : forall d B Θ Φ p1 p2 t ρ,
    psols G D d B Θ Φ (PAlt p1 p2) t ρ =
    papp (psols G D d B Θ Φ p1 t ρ) (psols G D d B Θ Φ p2 t ρ).
  Proof. intros. destruct d; reflexivity. Qed.

  Lemma psols_guard : forall d B Θ Φ p g t ρ,
    psols G D d B Θ Φ (PGuard p g) t ρ =
    pbind (psols G D d B Θ Φ p t ρ) (fun s =>
      if guard_ok G (rd (fst s) (tenv ρ)) (rd (snd s) (fenv ρ)) g then pret s else PNil).
  Proof. intros. destruct d; reflexivity. Qed.

  Lemma psols_exists : forall d B Θ Φ x p t ρ,
    psols G D d B Θ Φ (PExists x p) t ρ =
    pbind (psols G D d (S B) (clr Θ B) (clr Φ B) p t (env_add_t ρ x B)) (fun s =>
      match fst s B with
      | Some _ => pret (clr (fst s) B, snd s)
      | None => PNil
      end).
  Proof. intros. destruct d; reflexivity. Qed.

  Lemma psols_existsf : forall d B Θ Φ F p t ρ,
    psols G D d B Θ Φ (PExistsF F p) t ρ =
    pbind (psols G D d (S B) (clr Θ B) (clr Φ B) p t (env_add_f ρ F B)) (fun s =>
      match snd s B with
      | Some _ => pret (fst s, clr (snd s) B)
      | None => PNil
      end).
  Proof. intros. destruct d; reflexivity. Qed.

  Lemma psols_constr : forall d B Θ Φ p p' x t ρ,
    psols G D d B Θ Φ (PConstr p p' x) t ρ =
    pbind (psols G D d B Θ Φ p t ρ) (fun s =>
      match rd (fst s) (tenv ρ) x with
      | Some t' => psols G D d B (fst s) (snd s) p' t' ρ
      | None => PNil
      end).
  Proof. intros. destruct d; reflexivity. Qed.

  Lemma psols_call0 : forall B Θ Φ P xs Fs t ρ,
    psols G D 0 B Θ Φ (PCall P xs Fs) t ρ = PCut.
  Proof. reflexivity. Qed.

  Lemma psols_callS : forall d B Θ Φ P xs Fs t ρ,
    psols G D (S d) B Θ Φ (PCall P xs Fs) t ρ =
    match nth_error D P with
    | Some dd =>
        if Nat.eqb (length xs) (nparams dd) && Nat.eqb (length Fs) (nfparams dd)
        then psols G D d B Θ Φ (body dd) t (call_env ρ xs Fs)
        else PNil
    | None => PNil
    end.
  Proof. reflexivity. Qed.

  (** The same lemmas with the continuation of the specification. *)
  Lemma wbehaves_guard' : forall B Θ Φ g ρ k (Ls : sol -> plist sol),
    wbehaves B Θ Φ k (Ls (Θ, Φ)) ->
    wbehaves B Θ Φ (WGuard g ρ :: k)
      (pbind (if guard_ok G (rd Θ (tenv ρ)) (rd Φ (fenv ρ)) g then pret (Θ, Φ) else PNil) Ls).
  Proof.
    intros B Θ Φ g ρ k Ls H.
    assert (E : pbind (if guard_ok G (rd Θ (tenv ρ)) (rd Φ (fenv ρ)) g then pret (Θ, Φ)
                       else PNil) Ls =
                if guard_ok G (rd Θ (tenv ρ)) (rd Φ (fenv ρ)) g then Ls (Θ, Φ) else PNil)
      by (destruct (guard_ok _ _ _ g); [apply pbind_ret | reflexivity]).
    rewrite E. apply wbehaves_guard. exact H.
  Qed.

  Lemma wbehaves_check' : forall B Θ Φ k (Ls : sol -> plist sol),
    wbehaves B (clr Θ B) Φ k (Ls (clr Θ B, Φ)) ->
    wbehaves (S B) Θ Φ (WCheck B :: k)
      (pbind (match Θ B with Some _ => pret (clr Θ B, Φ) | None => PNil end) Ls).
  Proof.
    intros B Θ Φ k Ls H.
    assert (E : pbind (match Θ B with Some _ => pret (clr Θ B, Φ) | None => PNil end) Ls =
                match Θ B with Some _ => Ls (clr Θ B, Φ) | None => PNil end)
      by (destruct (Θ B); [apply pbind_ret | reflexivity]).
    rewrite E. apply wbehaves_check. exact H.
  Qed.

  Lemma wbehaves_checkf' : forall B Θ Φ k (Ls : sol -> plist sol),
    wbehaves B Θ (clr Φ B) k (Ls (Θ, clr Φ B)) ->
    wbehaves (S B) Θ Φ (WCheckF B :: k)
      (pbind (match Φ B with Some _ => pret (Θ, clr Φ B) | None => PNil end) Ls).
  Proof.
    intros B Θ Φ k Ls H.
    assert (E : pbind (match Φ B with Some _ => pret (Θ, clr Φ B) | None => PNil end) Ls =
                match Φ B with Some _ => Ls (Θ, clr Φ B) | None => PNil end)
      by (destruct (Φ B); [apply pbind_ret | reflexivity]).
    rewrite E. apply wbehaves_checkf. exact H.
  Qed.

  Lemma wbehaves_constr' : forall d B Θ Φ p x ρ k (Ls : sol -> plist sol),
    (forall t, wbehaves B Θ Φ (WMatch p t ρ d :: k) (pbind (psols G D d B Θ Φ p t ρ) Ls)) ->
    wbehaves B Θ Φ (WConstr p x ρ d :: k)
      (pbind (match rd Θ (tenv ρ) x with
              | Some t => psols G D d B Θ Φ p t ρ
              | None => PNil
              end) Ls).
  Proof.
    intros d B Θ Φ p x ρ k Ls H.
    assert (E : pbind (match rd Θ (tenv ρ) x with
                       | Some t => psols G D d B Θ Φ p t ρ
                       | None => PNil end) Ls =
                match rd Θ (tenv ρ) x with
                | Some t => pbind (psols G D d B Θ Φ p t ρ) Ls
                | None => PNil end)
      by (destruct (rd Θ (tenv ρ) x); reflexivity).
    rewrite E. apply wbehaves_constr. exact H.
  Qed.

  (** *** The main induction *)

  Definition WKB (d : nat) (p : pattern) : Prop :=
    forall B Θ Φ t ρ k (Ls : sol -> plist sol),
      (forall Θ' Φ', wbehaves B Θ' Φ' k (Ls (Θ', Φ'))) ->
      wbehaves B Θ Φ (WMatch p t ρ d :: k) (pbind (psols G D d B Θ Φ p t ρ) Ls).

  Lemma WKB_list : forall d ps, Forall (WKB d) ps ->
    forall B Θ Φ ts ρ k (Ls : sol -> plist sol),
      length ps = length ts ->
      (forall Θ' Φ', wbehaves B Θ' Φ' k (Ls (Θ', Φ'))) ->
      wbehaves B Θ Φ (witems ps ts ρ d k)
        (pbind (psols_list (fun Θ Φ q u => psols G D d B Θ Φ q u ρ) Θ Φ ps ts) Ls).
  Proof.
    intros d ps H. induction H as [|q ps Hq Hps IH]; intros B Θ Φ ts ρ k Ls Hl HL;
      destruct ts as [|u ts]; simpl in Hl; try discriminate.
    - simpl witems. unfold psols_list. rewrite pbind_ret. apply HL.
    - rewrite psols_list_cons, pbind_assoc. simpl witems.
      apply (Hq B Θ Φ u ρ (witems ps ts ρ d k)
               (fun s => pbind (psols_list (fun Θ Φ q u => psols G D d B Θ Φ q u ρ)
                                  (fst s) (snd s) ps ts) Ls)).
      intros Θ' Φ'. apply IH; auto.
  Qed.

  Ltac wrel_match := simpl; split; [reflexivity | split; [reflexivity | assumption]].

  Lemma WKB_gen : forall d, (forall d', d = S d' -> forall p, WKB d' p) -> forall p, WKB d p.
  Proof.
    intros d IHd p.
    induction p as [x|f ps Hps|p1 p2 IHp1 IHp2|p g IHp|x p IHp|F p IHp
                   |p p' x IHp1 IHp2|F ps Hps|P xs Fs] using pattern_ind';
      intros B Θ Φ t ρ k Ls HL c r Θm Φm nf stk km Hb Hw Hr Hk;
      inversion Hk as [|? a ? km' Ha Hk']; subst; clear Hk;
      destruct a as [p0 t0 ρm| | | |]; simpl in Ha; try contradiction;
      destruct Ha as (-> & -> & Hρ); simpl in Hb, Hw; destruct Hb as [Hcd Hb];
      destruct Hw as [Hρb Hw]; pose proof Hr as (_ & _ & _ & _ & _ & _ & HB0).
    - (* x *)
      rewrite psols_var. destruct (vfind x (tenv ρ)) as [s|] eqn:Hx.
      + assert (Hs : s < B) by (eapply (proj1 Hρb); eauto).
        assert (Hxm : vfind x (tenv ρm) = Some (r s)) by (rewrite (proj1 Hρ), Hx; reflexivity).
        assert (E : lookup (r s) Θm = Θ s) by (apply (proj1 Hr); auto).
        destruct (Θ s) as [t'|] eqn:Ht'.
        * destruct (Nat.eqb t' t) eqn:Et.
          -- apply Nat.eqb_eq in Et. subst t'. rewrite pbind_ret.
             eapply wfirst_step;
               [apply ST_Match_Var_Bound; unfold tsub, gsub; rewrite Hxm; exact E|].
             apply (HL Θ Φ c r); auto.
          -- apply Nat.eqb_neq in Et. cbn [pbind]. apply wfirst_backtrack.
             apply ST_Match_Var_Conflict. right. exists t'. split; auto.
             unfold tsub, gsub. rewrite Hxm. exact E.
        * rewrite pbind_ret. eapply wfirst_step; [eapply ST_Match_Var_Bind; eauto|].
          apply (HL _ _ c r); auto. apply wmrel_bind_t; auto.
      + cbn [pbind]. apply wfirst_backtrack. apply ST_Match_Var_Conflict. left.
        rewrite (proj1 Hρ), Hx. reflexivity.
    - (* f(ps) *)
      rewrite psols_app.
      destruct (Nat.eqb (label G t) f && Nat.eqb (length ps) (length (children G t))) eqn:E.
      + apply andb_prop in E. destruct E as [E1 E2]. apply Nat.eqb_eq in E1, E2.
        eapply wfirst_step; [apply ST_Match_Fun; auto|].
        apply (WKB_list d ps Hps B Θ Φ (children G t) ρ k Ls E2 HL c r).
        * apply wbud_witems; auto.
        * apply wsc_witems; auto.
        * exact Hr.
        * apply Forall2_witems; auto.
      + cbn [pbind]. apply wfirst_backtrack. apply ST_Match_Fun_Conflict.
        apply andb_false_iff in E. destruct E as [E|E]; apply Nat.eqb_neq in E; auto.
    - (* p1 ‖ p2 *)
      rewrite psols_alt, pbind_papp.
      eapply wfirst_step; [apply ST_Match_Alt|].
      assert (H1 : wfirst c (pbind (psols G D d B Θ Φ p1 t ρ) Ls)
                     (Running Θm Φm nf ((Θm, Φm, AMatch p2 t ρm :: km') :: stk)
                              (AMatch p1 t ρm :: km'))
                     nf ((Θm, Φm, AMatch p2 t ρm :: km') :: stk)).
      { apply (IHp1 B Θ Φ t ρ k Ls HL c r); simpl; auto. constructor; auto. wrel_match. }
      destruct (pbind (psols G D d B Θ Φ p1 t ρ) Ls) as [| |[Θa Φa] La];
        simpl in H1 |- *; auto.
      destruct H1 as (nf' & Hle & Hs).
      eapply wfirst_star; [exact Hs|]. eapply wfirst_nf; [exact Hle|].
      apply (IHp2 B Θ Φ t ρ k Ls HL c r); simpl; auto.
      + eapply wmrel_nf; eauto.
      + constructor; auto. wrel_match.
    - (* guard *)
      rewrite psols_guard, pbind_assoc.
      eapply wfirst_step; [apply ST_Match_Guard|].
      apply (IHp B Θ Φ t ρ (WGuard g ρ :: k)
               (fun s => pbind (if guard_ok G (rd (fst s) (tenv ρ)) (rd (snd s) (fenv ρ)) g
                                then pret s else PNil) Ls)
               (fun Θ' Φ' => wbehaves_guard' B Θ' Φ' g ρ k Ls (HL Θ' Φ'))
               c r Θm Φm nf stk (AMatch p t ρm :: AGuard g ρm :: km')).
      + simpl. auto.
      + simpl. auto.
      + exact Hr.
      + constructor; [wrel_match|]. constructor; [simpl; auto|exact Hk'].
    - (* ∃x *)
      rewrite psols_exists, pbind_assoc.
      eapply wfirst_step; [apply ST_Match_Exists|].
      eapply wfirst_nf; [apply (Nat.le_succ_diag_r nf)|].
      apply (IHp (S B) (clr Θ B) (clr Φ B) t (env_add_t ρ x B) (WCheck B :: k)
               (fun s => pbind (match fst s B with
                                | Some _ => pret (clr (fst s) B, snd s)
                                | None => PNil end) Ls)
               (fun Θ' Φ' => wbehaves_check' B Θ' Φ' k Ls (HL _ _))
               c (ralloc r B nf) Θm Φm (S nf) stk
               (AMatch p t (env_add_t ρm x nf) :: ACheckName nf :: km')).
      + simpl. auto.
      + simpl. split; [apply env_below_add_t; auto|]. auto.
      + apply wmrel_alloc. exact Hr.
      + constructor; [simpl; split; [reflexivity|split; [reflexivity|]]|].
        * apply env_rel_add_t; auto.
        * constructor; [simpl; unfold ralloc; rewrite Nat.eqb_refl; reflexivity|].
          eapply wrel_agree; [exact Hk'|exact Hw|].
          intros s Hs. unfold ralloc. rewrite (proj2 (Nat.eqb_neq s B)) by lia. reflexivity.
    - (* ∃F *)
      rewrite psols_existsf, pbind_assoc.
      eapply wfirst_step; [apply ST_Match_ExistsF|].
      eapply wfirst_nf; [apply (Nat.le_succ_diag_r nf)|].
      apply (IHp (S B) (clr Θ B) (clr Φ B) t (env_add_f ρ F B) (WCheckF B :: k)
               (fun s => pbind (match snd s B with
                                | Some _ => pret (fst s, clr (snd s) B)
                                | None => PNil end) Ls)
               (fun Θ' Φ' => wbehaves_checkf' B Θ' Φ' k Ls (HL _ _))
               c (ralloc r B nf) Θm Φm (S nf) stk
               (AMatch p t (env_add_f ρm F nf) :: ACheckFName nf :: km')).
      + simpl. auto.
      + simpl. split; [apply env_below_add_f; auto|]. auto.
      + apply wmrel_alloc. exact Hr.
      + constructor; [simpl; split; [reflexivity|split; [reflexivity|]]|].
        * apply env_rel_add_f; auto.
        * constructor; [simpl; unfold ralloc; rewrite Nat.eqb_refl; reflexivity|].
          eapply wrel_agree; [exact Hk'|exact Hw|].
          intros s Hs. unfold ralloc. rewrite (proj2 (Nat.eqb_neq s B)) by lia. reflexivity.
    - (* p ; (p' ≈ x) *)
      rewrite psols_constr, pbind_assoc.
      eapply wfirst_step; [apply ST_Match_MatchConstr|].
      apply (IHp1 B Θ Φ t ρ (WConstr p' x ρ d :: k)
               (fun s => pbind (match rd (fst s) (tenv ρ) x with
                                | Some t' => psols G D d B (fst s) (snd s) p' t' ρ
                                | None => PNil end) Ls)
               (fun Θ' Φ' => wbehaves_constr' d B Θ' Φ' p' x ρ k Ls
                               (fun t' => IHp2 B Θ' Φ' t' ρ k Ls HL))
               c r Θm Φm nf stk (AMatch p t ρm :: AMatchConstr p' x ρm :: km')).
      + simpl. auto.
      + simpl. auto.
      + exact Hr.
      + constructor; [wrel_match|]. constructor; [wrel_match|exact Hk'].
    - (* F(ps) *)
      rewrite psols_funvar.
      destruct (Nat.eqb (length ps) (length (children G t))) eqn:El.
      + apply Nat.eqb_eq in El.
        destruct (vfind F (fenv ρ)) as [s|] eqn:HF.
        * assert (Hs : s < B) by (eapply (proj2 Hρb); eauto).
          assert (HFm : vfind F (fenv ρm) = Some (r s))
            by (rewrite (proj2 Hρ), HF; reflexivity).
          assert (E : lookup (r s) Φm = Φ s) by (apply (proj1 Hr); auto).
          destruct (Φ s) as [f|] eqn:Hf.
          -- destruct (Nat.eqb f (label G t)) eqn:Ef.
             ++ apply Nat.eqb_eq in Ef. subst f.
                eapply wfirst_step;
                  [apply ST_Match_FunVar_Bound; [unfold fsub, gsub; rewrite HFm; exact E|exact El]|].
                apply (WKB_list d ps Hps B Θ Φ (children G t) ρ k Ls El HL c r).
                ** apply wbud_witems; auto.
                ** apply wsc_witems; auto.
                ** exact Hr.
                ** apply Forall2_witems; auto.
             ++ apply Nat.eqb_neq in Ef. cbn [pbind]. apply wfirst_backtrack.
                apply ST_Match_FunVar_Conflict. right. left. exists f.
                split; auto. unfold fsub, gsub. rewrite HFm. exact E.
          -- eapply wfirst_step; [eapply ST_Match_FunVar_Bind; eauto|].
             apply (WKB_list d ps Hps B Θ (upd Φ s (label G t)) (children G t) ρ k Ls El HL c r).
             ** apply wbud_witems; auto.
             ** apply wsc_witems; auto.
             ** apply wmrel_bind_f; auto.
             ** apply Forall2_witems; auto.
        * cbn [pbind]. apply wfirst_backtrack. apply ST_Match_FunVar_Conflict. left.
          rewrite (proj2 Hρ), HF. reflexivity.
      + cbn [pbind]. apply wfirst_backtrack. apply ST_Match_FunVar_Conflict. right. right.
        apply Nat.eqb_neq. exact El.
    - (* P(xs) *)
      destruct d as [|d'].
      + rewrite psols_call0. cbn [pbind]. simpl.
        assert (c = 0) by lia. subst. reflexivity.
      + rewrite psols_callS.
        destruct (nth_error D P) as [dd|] eqn:Hd.
        * destruct (Nat.eqb (length xs) (nparams dd) && Nat.eqb (length Fs) (nfparams dd)) eqn:E.
          -- apply andb_prop in E. destruct E as [E1 E2]. apply Nat.eqb_eq in E1, E2.
             eapply wfirst_step_pred; [eapply ST_Match_Mu; eauto|].
             apply (IHd d' eq_refl (body dd) B Θ Φ t (call_env ρ xs Fs) k Ls HL (pred c) r
                      Θm Φm nf stk (AMatch (body dd) t (call_env ρm xs Fs) :: km')).
             ++ simpl. split; [lia|]. eapply wbud_le; [|exact Hb]. lia.
             ++ simpl. split; [apply env_below_call; auto | auto].
             ++ exact Hr.
             ++ constructor; [|exact Hk']. simpl. split; [reflexivity|split; [reflexivity|]].
                apply env_rel_call. exact Hρ.
          -- cbn [pbind]. apply wfirst_backtrack. apply ST_Match_Mu_Conflict.
             intros d0 Hd0. rewrite Hd in Hd0. inversion Hd0; subst.
             apply andb_false_iff in E. destruct E as [E|E]; apply Nat.eqb_neq in E; auto.
        * cbn [pbind]. apply wfirst_backtrack. apply ST_Match_Mu_Conflict.
          intros d0 Hd0. congruence.
  Qed.

  Lemma WKB_all : forall d p, WKB d p.
  Proof.
    induction d as [|d IH]; apply WKB_gen; intros d' E; [discriminate|].
    injection E as <-. exact IH.
  Qed.
End MachineW.

(** ** Every element of [psols] is a declarative match *)

Definition ext_below {A} (B : nat) (Θ Θ' : nat -> option A) : Prop :=
  forall s v, s < B -> Θ s = Some v -> Θ' s = Some v.

Lemma ext_below_refl : forall A B (Θ : nat -> option A), ext_below B Θ Θ.
Proof. unfold ext_below. auto. Qed.

Lemma ext_below_trans : forall A B (Θ1 Θ2 Θ3 : nat -> option A),
  ext_below B Θ1 Θ2 -> ext_below B Θ2 Θ3 -> ext_below B Θ1 Θ3.
Proof. unfold ext_below. auto. Qed.

Lemma ext_below_rd : forall A B (Θ Θ' : nat -> option A) m,
  ext_below B Θ Θ' -> map_below B m -> ext (rd Θ m) (rd Θ' m).
Proof.
  unfold ext_below, ext, rd, map_below. intros A B Θ Θ' m H Hm x v Hx.
  destruct (vfind x m) eqn:E; [|discriminate]. eapply H; eauto.
Qed.

Lemma ext_below_upd : forall A B (Θ : nat -> option A) s v,
  Θ s = None -> ext_below B Θ (upd Θ s v).
Proof.
  unfold ext_below, upd. intros A B Θ s v H s' w _ Hs'.
  destruct (Nat.eqb s s') eqn:E; auto. apply Nat.eqb_eq in E. subst. congruence.
Qed.

Lemma rd_upd_slot : forall A (Θ : nat -> option A) m x s v,
  vfind x m = Some s -> rd (upd Θ s v) m x = Some v.
Proof. intros. unfold rd, upd. rewrite H, Nat.eqb_refl. reflexivity. Qed.

Lemma rd_call_map : forall A (Θ : nat -> option A) m xs x,
  rd Θ (call_map m xs 0) x = call_sub (rd Θ m) xs x.
Proof.
  intros. unfold rd, call_sub. rewrite vfind_call_map. simpl.
  rewrite Nat.sub_0_r. destruct (nth_error xs x); reflexivity.
Qed.

Section SolSound.
  Variable G : graph.
  Variable D : list pdef.

  Definition SPd (d : nat) (p : pattern) : Prop :=
    forall B Θ Φ t ρ Θ' Φ', env_below B ρ ->
      pIn (Θ', Φ') (psols G D d B Θ Φ p t ρ) ->
      matches G D (rd Θ' (tenv ρ)) (rd Φ' (fenv ρ)) p t /\
      ext_below B Θ Θ' /\ ext_below B Φ Φ'.

  Lemma SPd_list : forall d ps, Forall (SPd d) ps ->
    forall B Θ Φ ts ρ Θ' Φ', env_below B ρ ->
      pIn (Θ', Φ') (psols_list (fun Θ Φ q u => psols G D d B Θ Φ q u ρ) Θ Φ ps ts) ->
      matches_list G D (rd Θ' (tenv ρ)) (rd Φ' (fenv ρ)) ps ts /\
      ext_below B Θ Θ' /\ ext_below B Φ Φ'.
  Proof.
    intros d ps H. induction H as [|q ps Hq Hps IH]; intros B Θ Φ ts ρ Θ' Φ' Hρ Hin;
      destruct ts as [|u ts]; simpl in Hin; try contradiction.
    - destruct Hin as [E|[]]. inversion E; subst.
      split; [apply ML_Nil | split; apply ext_below_refl].
    - apply pIn_pbind in Hin. destruct Hin as [[Θ1 Φ1] [H1 H2]].
      destruct (Hq _ _ _ _ _ _ _ Hρ H1) as (M1 & E1 & F1).
      destruct (IH _ _ _ _ _ _ _ Hρ H2) as (M2 & E2 & F2).
      split; [|split; eapply ext_below_trans; eauto].
      apply ML_Cons; auto. eapply match_weakening; [exact M1| |];
        eapply ext_below_rd; eauto; apply Hρ.
  Qed.

  Lemma SPd_gen : forall d, (forall d', d = S d' -> forall p, SPd d' p) -> forall p, SPd d p.
  Proof.
    intros d IHd p.
    induction p as [x|f ps Hps|p1 p2 IHp1 IHp2|p g IHp|x p IHp|F p IHp
                   |p p' x IHp1 IHp2|F ps Hps|P xs Fs] using pattern_ind';
      intros B Θ Φ t ρ Θ' Φ' Hρ Hin.
    - (* x *)
      rewrite psols_var in Hin. destruct (vfind x (tenv ρ)) as [s|] eqn:Hx; [|contradiction].
      destruct (Θ s) as [t'|] eqn:Hs.
      + destruct (Nat.eqb t' t) eqn:E; [|contradiction]. apply Nat.eqb_eq in E. subst.
        destruct Hin as [Hin|[]]. inversion Hin; subst.
        split; [|split; apply ext_below_refl]. apply P_Var. unfold rd. rewrite Hx. exact Hs.
      + destruct Hin as [Hin|[]]. inversion Hin; subst.
        split; [|split; [apply ext_below_upd; auto | apply ext_below_refl]].
        apply P_Var. apply rd_upd_slot. exact Hx.
    - (* f(ps) *)
      rewrite psols_app in Hin.
      destruct (Nat.eqb (label G t) f && Nat.eqb (length ps) (length (children G t))) eqn:E;
        [|contradiction].
      apply andb_prop in E. destruct E as [E _]. apply Nat.eqb_eq in E.
      destruct (SPd_list d ps Hps _ _ _ _ _ _ _ Hρ Hin) as (M & E1 & F1).
      split; auto. apply P_Fun; auto.
    - (* p1 ‖ p2 *)
      rewrite psols_alt in Hin. apply pIn_papp in Hin. destruct Hin as [Hin|Hin].
      + destruct (IHp1 _ _ _ _ _ _ _ Hρ Hin) as (M & E1 & F1). split; auto. apply P_Alt1. exact M.
      + destruct (IHp2 _ _ _ _ _ _ _ Hρ Hin) as (M & E1 & F1). split; auto. apply P_Alt2. exact M.
    - (* guard *)
      rewrite psols_guard in Hin. apply pIn_pbind in Hin. destruct Hin as [[Θ1 Φ1] [H1 H2]].
      simpl in H2. destruct (guard_ok G (rd Θ1 (tenv ρ)) (rd Φ1 (fenv ρ)) g) eqn:Eg;
        [|contradiction].
      destruct H2 as [H2|[]]. inversion H2; subst.
      destruct (IHp _ _ _ _ _ _ _ Hρ H1) as (M & E1 & F1). split; auto.
      apply P_Guard; auto. unfold guard_ok in Eg.
      destruct (eval_guard G _ _ g) as [[|]|]; congruence.
    - (* ∃x *)
      rewrite psols_exists in Hin. apply pIn_pbind in Hin. destruct Hin as [[Θ1 Φ1] [H1 H2]].
      simpl in H2. destruct (Θ1 B) as [v|] eqn:Ev; [|contradiction].
      destruct H2 as [H2|[]]. inversion H2; subst.
      destruct (IHp _ _ _ _ _ _ _ (env_below_add_t B ρ x Hρ) H1) as (M & E1 & F1).
      split; [|split].
      + apply P_Exists with (t' := v). eapply matches_ext; [| |exact M].
        * intros y. simpl. unfold rd, upd, clr. rewrite vfind_add.
          destruct (Nat.eqb x y); auto.
          destruct (vfind y (tenv ρ)) as [s|] eqn:Hy; auto.
          assert (s < B) by (eapply (proj1 Hρ); eauto).
          rewrite (proj2 (Nat.eqb_neq B s)) by lia. reflexivity.
        * intros y. reflexivity.
      + intros s w Hs Hw. unfold clr. rewrite (proj2 (Nat.eqb_neq B s)) by lia.
        apply E1; [lia|]. unfold clr. rewrite (proj2 (Nat.eqb_neq B s)) by lia. exact Hw.
      + intros s w Hs Hw. apply F1; [lia|]. unfold clr.
        rewrite (proj2 (Nat.eqb_neq B s)) by lia. exact Hw.
    - (* ∃F *)
      rewrite psols_existsf in Hin. apply pIn_pbind in Hin. destruct Hin as [[Θ1 Φ1] [H1 H2]].
      simpl in H2. destruct (Φ1 B) as [v|] eqn:Ev; [|contradiction].
      destruct H2 as [H2|[]]. inversion H2; subst.
      destruct (IHp _ _ _ _ _ _ _ (env_below_add_f B ρ F Hρ) H1) as (M & E1 & F1).
      split; [|split].
      + apply P_ExistsF with (f := v). eapply matches_ext; [| |exact M].
        * intros y. reflexivity.
        * intros y. simpl. unfold rd, upd, clr. rewrite vfind_add.
          destruct (Nat.eqb F y); auto.
          destruct (vfind y (fenv ρ)) as [s|] eqn:Hy; auto.
          assert (s < B) by (eapply (proj2 Hρ); eauto).
          rewrite (proj2 (Nat.eqb_neq B s)) by lia. reflexivity.
      + intros s w Hs Hw. apply E1; [lia|]. unfold clr.
        rewrite (proj2 (Nat.eqb_neq B s)) by lia. exact Hw.
      + intros s w Hs Hw. unfold clr. rewrite (proj2 (Nat.eqb_neq B s)) by lia.
        apply F1; [lia|]. unfold clr. rewrite (proj2 (Nat.eqb_neq B s)) by lia. exact Hw.
    - (* p ; (p' ≈ x) *)
      rewrite psols_constr in Hin. apply pIn_pbind in Hin. destruct Hin as [[Θ1 Φ1] [H1 H2]].
      simpl in H2. destruct (rd Θ1 (tenv ρ) x) as [t'|] eqn:Ex; [|contradiction].
      destruct (IHp1 _ _ _ _ _ _ _ Hρ H1) as (M1 & E1 & F1).
      destruct (IHp2 _ _ _ _ _ _ _ Hρ H2) as (M2 & E2 & F2).
      assert (X1 : ext (rd Θ1 (tenv ρ)) (rd Θ' (tenv ρ)))
        by (eapply ext_below_rd; eauto; apply Hρ).
      assert (X2 : ext (rd Φ1 (fenv ρ)) (rd Φ' (fenv ρ)))
        by (eapply ext_below_rd; eauto; apply Hρ).
      split; [|split; eapply ext_below_trans; eauto].
      eapply P_MatchConstr; [eapply match_weakening; eauto | apply X1; exact Ex | exact M2].
    - (* F(ps) *)
      rewrite psols_funvar in Hin.
      destruct (Nat.eqb (length ps) (length (children G t))) eqn:El; [|contradiction].
      destruct (vfind F (fenv ρ)) as [s|] eqn:HF; [|contradiction].
      assert (Hs : s < B) by (eapply (proj2 Hρ); eauto).
      destruct (Φ s) as [f|] eqn:Hf.
      + destruct (Nat.eqb f (label G t)) eqn:Ef; [|contradiction].
        apply Nat.eqb_eq in Ef. subst.
        destruct (SPd_list d ps Hps _ _ _ _ _ _ _ Hρ Hin) as (M & E1 & F1).
        split; auto. apply P_FunVar; auto. unfold rd. rewrite HF. apply F1; auto.
      + destruct (SPd_list d ps Hps _ _ _ _ _ _ _ Hρ Hin) as (M & E1 & F1).
        split; [|split; auto].
        * apply P_FunVar; auto. unfold rd. rewrite HF. apply F1; auto.
          unfold upd. rewrite Nat.eqb_refl. reflexivity.
        * eapply ext_below_trans; [apply ext_below_upd; exact Hf | exact F1].
    - (* P(xs) *)
      destruct d as [|d']; [rewrite psols_call0 in Hin; contradiction|].
      rewrite psols_callS in Hin.
      destruct (nth_error D P) as [dd|] eqn:Hd; [|contradiction].
      destruct (Nat.eqb (length xs) (nparams dd) && Nat.eqb (length Fs) (nfparams dd)) eqn:E;
        [|contradiction].
      apply andb_prop in E. destruct E as [E1 E2]. apply Nat.eqb_eq in E1, E2.
      destruct (IHd d' eq_refl (body dd) _ _ _ _ _ _ _ (env_below_call B ρ xs Fs Hρ) Hin)
        as (M & X1 & X2).
      split; auto. eapply P_Mu; eauto. eapply matches_ext; [| |exact M].
      + intros y. apply rd_call_map.
      + intros y. apply rd_call_map.
  Qed.

  Lemma psols_sound : forall d p, SPd d p.
  Proof.
    induction d as [|d IH]; apply SPd_gen; intros d' E; [discriminate|].
    injection E as <-. exact IH.
  Qed.
End SolSound.

(** ** Which answer, whole calculus *)

Section WholeTheorems.
  Variable G : graph.
  Variable D : list pdef.

  Lemma env_below_root : forall n m, env_below (max n m) (root_env n m).
  Proof.
    intros n m. split; intros x g H; simpl in H; rewrite vfind_ident_map in H;
      destruct (Nat.ltb x _) eqn:E; inversion H; subst; apply Nat.ltb_lt in E; lia.
  Qed.

  Lemma init_wfirst : forall K n m p t,
    wfirst G D (max n m) K (psols G D K (max n m) none_t none_f p t (root_env n m))
      (init n m p t) (max n m) [].
  Proof.
    intros K n m p t.
    rewrite <- (pbind_ret_r _ (psols G D K (max n m) none_t none_f p t (root_env n m))).
    apply (WKB_all G D (max n m) K p (max n m) none_t none_f t (root_env n m) [] pret
             (fun Θ' Φ' => wbehaves_done G D (max n m) (max n m) Θ' Φ')
             K (fun s => s) empty empty (max n m) [] [AMatch p t (root_env n m)]).
    - simpl. auto.
    - simpl. split; auto. apply env_below_root.
    - refine (conj _ (conj _ (conj _ (conj _ (conj _ (conj _ _)))))); cbv beta.
      + intros s Hs. rewrite !lookup_empty. split; reflexivity.
      + auto.
      + auto.
      + intros g v Hg. rewrite lookup_empty in Hg. discriminate.
      + intros g v Hg. rewrite lookup_empty in Hg. discriminate.
      + auto.
      + auto.
    - constructor; [|constructor]. simpl. split; [reflexivity|split; [reflexivity|]].
      split; intros y; destruct (vfind y _); reflexivity.
  Qed.

  Lemma wout_read : forall n m Θm Φm Θ Φ,
    wout (max n m) Θm Φm Θ Φ ->
    (forall x, tsub Θm (root_env n m) x = rd Θ (ident_map n) x) /\
    (forall F, fsub Φm (root_env n m) F = rd Φ (ident_map m) F).
  Proof.
    intros n m Θm Φm Θ Φ H. split; intros x; unfold tsub, fsub, gsub, rd; simpl;
      rewrite vfind_ident_map; destruct (Nat.ltb x _) eqn:E; auto;
      apply Nat.ltb_lt in E; apply H; lia.
  Qed.

  Lemma match_pattern_det : forall fuel1 fuel2 n m p t o1 o2,
    match_pattern G D fuel1 n m p t = o1 -> o1 <> OOutOfFuel ->
    match_pattern G D fuel2 n m p t = o2 -> o2 <> OOutOfFuel -> o1 = o2.
  Proof.
    intros fuel1 fuel2 n m p t o1 o2 H1 N1 H2 N2. unfold match_pattern in *.
    rewrite <- (run_mono G D fuel1 (max fuel1 fuel2) _ o1 ltac:(lia) H1 N1).
    rewrite <- (run_mono G D fuel2 (max fuel1 fuel2) _ o2 ltac:(lia) H2 N2).
    reflexivity.
  Qed.

  (** Which answer: if the machine answers with [fuel] steps, then at every
      call depth [K >= fuel] the first solution is its answer (read
      through the root's scope), and "no match" means there is none. *)
  Theorem first_solution_k : forall fuel K n m p t,
    fuel <= K ->
    (forall Θ Φ, match_pattern G D fuel n m p t = OSuccess Θ Φ ->
       exists σ ψ L, solutions_k G D K n m p t = PCons (σ, ψ) L /\
         (forall x, tsub Θ (root_env n m) x = σ x) /\
         (forall F, fsub Φ (root_env n m) F = ψ F)) /\
    (match_pattern G D fuel n m p t = OFailure -> solutions_k G D K n m p t = PNil).
  Proof.
    intros fuel K n m p t Hle. pose proof (init_wfirst K n m p t) as H.
    unfold solutions_k.
    destruct (psols G D K (max n m) none_t none_f p t (root_env n m)) as [| |[Θs Φs] L];
      simpl in H; split.
    - intros Θ Φ Hm. exfalso. destruct H as (nf' & _ & H).
      apply run_refines_success in Hm.
      assert (E : Success Θ Φ = Failure)
        by (eapply star_terminal_det; eauto using success_terminal, failure_terminal).
      discriminate.
    - reflexivity.
    - intros Θ Φ Hm. exfalso. unfold match_pattern in Hm.
      rewrite (run_mono G D fuel K _ _ Hle Hm) in H; discriminate.
    - intros Hm. exfalso. unfold match_pattern in Hm.
      rewrite (run_mono G D fuel K _ _ Hle Hm) in H; discriminate.
    - intros Θ Φ Hm. destruct H as (Θm & Φm & Hs & Ho).
      apply run_refines_success in Hm.
      assert (E : Success Θ Φ = Success Θm Φm)
        by (eapply star_terminal_det; eauto using success_terminal).
      inversion E; subst. eexists _, _, _. split; [reflexivity|]. apply wout_read. exact Ho.
    - intros Hm. exfalso. destruct H as (Θm & Φm & Hs & _).
      apply run_refines_failure in Hm.
      assert (E : Failure = Success Θm Φm)
        by (eapply star_terminal_det; eauto using success_terminal, failure_terminal).
      discriminate.
  Qed.

  (** Conversely, a first solution known at some depth is the machine's
      answer with enough fuel, and "none" is its failure. *)
  Theorem first_solution_k_complete : forall K n m p t,
    (forall σ ψ L, solutions_k G D K n m p t = PCons (σ, ψ) L ->
       exists fuel Θ Φ, match_pattern G D fuel n m p t = OSuccess Θ Φ /\
         (forall x, tsub Θ (root_env n m) x = σ x) /\
         (forall F, fsub Φ (root_env n m) F = ψ F)) /\
    (solutions_k G D K n m p t = PNil -> exists fuel, match_pattern G D fuel n m p t = OFailure).
  Proof.
    intros K n m p t. pose proof (init_wfirst K n m p t) as H.
    unfold solutions_k.
    destruct (psols G D K (max n m) none_t none_f p t (root_env n m)) as [| |[Θs Φs] L];
      simpl in H; split; intros; try discriminate.
    - destruct H as (nf' & _ & H).
      destruct (proj2 (run_complete G D _ _ H) eq_refl) as [fuel Hr].
      exists fuel. exact Hr.
    - inversion H0; subst. destruct H as (Θm & Φm & Hs & Ho).
      destruct (proj1 (run_complete G D _ _ Hs) Θm Φm eq_refl) as [fuel Hr].
      exists fuel, Θm, Φm. split; [exact Hr|]. apply wout_read. exact Ho.
  Qed.

  (** A cut is honest: the machine is still running after [K] steps. *)
  Theorem solutions_k_cut : forall K n m p t,
    solutions_k G D K n m p t = PCut ->
    forall fuel, fuel <= K -> match_pattern G D fuel n m p t = OOutOfFuel.
  Proof.
    intros K n m p t E fuel Hle. pose proof (init_wfirst K n m p t) as H.
    unfold solutions_k in E.
    destruct (psols G D K (max n m) none_t none_f p t (root_env n m)); try discriminate.
    simpl in H. eapply run_oof_le; eauto.
  Qed.

  (** The first solution never changes with the depth: at every depth it
      is the machine's answer, or still unknown ([PCut]). *)
  Theorem first_solution_k_stable : forall fuel n m p t,
    (forall Θ Φ, match_pattern G D fuel n m p t = OSuccess Θ Φ ->
       forall K, solutions_k G D K n m p t = PCut \/
         exists σ ψ L, solutions_k G D K n m p t = PCons (σ, ψ) L /\
           (forall x, tsub Θ (root_env n m) x = σ x) /\
           (forall F, fsub Φ (root_env n m) F = ψ F)) /\
    (match_pattern G D fuel n m p t = OFailure ->
       forall K, solutions_k G D K n m p t = PCut \/ solutions_k G D K n m p t = PNil).
  Proof.
    intros fuel n m p t. split.
    - intros Θ Φ Hm K. destruct (first_solution_k_complete K n m p t) as [Hc Hn].
      destruct (solutions_k G D K n m p t) as [| |[σ ψ] L] eqn:E; auto.
      + exfalso. destruct (Hn eq_refl) as [fuel' Hf].
        assert (OSuccess Θ Φ = OFailure) by (eapply match_pattern_det; eauto; discriminate).
        discriminate.
      + right. destruct (Hc σ ψ L eq_refl) as (fuel' & Θ' & Φ' & Hm' & H1 & H2).
        assert (Ee : OSuccess Θ Φ = OSuccess Θ' Φ')
          by (eapply match_pattern_det; eauto; discriminate).
        inversion Ee; subst. exists σ, ψ, L. auto.
    - intros Hm K. destruct (first_solution_k_complete K n m p t) as [Hc _].
      destruct (solutions_k G D K n m p t) as [| |[σ ψ] L] eqn:E; auto.
      exfalso. destruct (Hc σ ψ L eq_refl) as (fuel' & Θ' & Φ' & Hm' & _).
      assert (OFailure = OSuccess Θ' Φ') by (eapply match_pattern_det; eauto; discriminate).
      discriminate.
  Qed.

  (** Every element of [solutions_k] is a declarative match of the root's
      variables. *)
  Theorem solutions_k_sound : forall K n m p t σ ψ,
    pIn (σ, ψ) (solutions_k G D K n m p t) -> matches G D σ ψ p t.
  Proof.
    intros K n m p t σ ψ H. unfold solutions_k in H.
    assert (Hm : forall l : plist sol, pIn (σ, ψ)
                   (pmap (fun s => (rd (fst s) (ident_map n), rd (snd s) (ident_map m))) l) ->
                 exists Θ Φ, pIn (Θ, Φ) l /\ σ = rd Θ (ident_map n) /\ ψ = rd Φ (ident_map m)).
    { induction l as [| |[Θ Φ] l IH]; simpl; intros Hl; try contradiction.
      destruct Hl as [Hl|Hl].
      - inversion Hl; subst. exists Θ, Φ. auto.
      - destruct (IH Hl) as (Θ' & Φ' & H1 & H2). exists Θ', Φ'. auto. }
    destruct (Hm _ H) as (Θ & Φ & Hin & -> & ->).
    destruct (psols_sound G D K p (max n m) none_t none_f t (root_env n m) Θ Φ
                (env_below_root n m) Hin) as [M _].
    exact M.
  Qed.

  (** No solution at some depth: no declarative match at all (well-formed
      patterns, see [wfb]). *)
  Corollary solutions_k_nil : forall K n m p t,
    wf_defs D = true -> wfb D p = true ->
    solutions_k G D K n m p t = PNil ->
    forall σ ψ, (forall x, n <= x -> σ x = None) -> (forall F, m <= F -> ψ F = None) ->
    ~ matches G D σ ψ p t.
  Proof.
    intros K n m p t Hd Hp E. destruct (proj2 (first_solution_k_complete K n m p t) E)
      as [fuel Hf].
    eapply match_pattern_fail_sound; eauto.
  Qed.
End WholeTheorems.

(** ** Which answer the library gives, whole calculus *)
Section RootWhole.
  Variable G : graph.
  Variable D : list pdef.

  (** [m.bindings] is the first solution at every depth [K >= fuel]. *)
  Theorem match_root_first_k : forall fuel K r t d bs fbs,
    nth_error D r = Some d -> fuel <= K ->
    match_root G D fuel r t = RMatch bs fbs ->
    exists σ ψ L, solutions_k G D K (nparams d) (nfparams d) (body d) t = PCons (σ, ψ) L /\
      (forall x, assoc bs x = σ x) /\ (forall F, assoc fbs F = ψ F).
  Proof.
    intros fuel K r t d bs fbs Hd Hle H. unfold match_root in H. rewrite Hd in H.
    destruct (admits _ _ _); [|discriminate].
    destruct (match_pattern G D fuel (nparams d) (nfparams d) (body d) t) as [Θ Φ| |]
      eqn:Hm; simpl in H; try discriminate.
    inversion H; subst.
    destruct (proj1 (first_solution_k G D fuel K _ _ _ t Hle) Θ Φ Hm)
      as (σ & ψ & L & E & H1 & H2).
    exists σ, ψ, L. split; auto. split.
    - intros x. rewrite assoc_project, <- H1. reflexivity.
    - intros F. rewrite assoc_project, <- H2. reflexivity.
  Qed.

  (** "No match" means no solution at any depth. *)
  Theorem match_root_none_k : forall fuel r t d,
    nth_error D r = Some d ->
    match_root G D fuel r t = RNoMatch ->
    forall K s L, solutions_k G D K (nparams d) (nfparams d) (body d) t <> PCons s L.
  Proof.
    intros fuel r t d Hd H K [σ ψ] L E. unfold match_root in H. rewrite Hd in H.
    destruct (admits G t (ri_find (root_index D) r)) eqn:Hi.
    - destruct (match_pattern G D fuel (nparams d) (nfparams d) (body d) t) eqn:Hm;
        simpl in H; try discriminate.
      destruct (proj1 (first_solution_k_complete G D K _ _ _ t) σ ψ L E)
        as (fuel' & Θ' & Φ' & Hm' & _).
      assert (OFailure = OSuccess Θ' Φ')
        by (eapply match_pattern_det; eauto; discriminate).
      discriminate.
    - assert (Hin : pIn (σ, ψ) (solutions_k G D K (nparams d) (nfparams d) (body d) t))
        by (rewrite E; left; reflexivity).
      apply solutions_k_sound in Hin.
      eapply root_index_no_match; eauto.
  Qed.
End RootWhole.

(** ** On the fragment, [solutions_k] is the earlier [solutions] *)

(** [prel R L l]: the partial list [L] has no cut and is [l], element by
    element up to [R]. *)
Fixpoint prel {A B} (R : A -> B -> Prop) (L : plist A) (l : list B) : Prop :=
  match L, l with
  | PNil, [] => True
  | PCons a L', b :: l' => R a b /\ prel R L' l'
  | _, _ => False
  end.

Lemma prel_app : forall A B (R : A -> B -> Prop) L1 l1 L2 l2,
  prel R L1 l1 -> prel R L2 l2 -> prel R (papp L1 L2) (l1 ++ l2).
Proof.
  induction L1 as [| |a L1 IH]; intros [|b l1] L2 l2 H1 H2; simpl in *; try contradiction;
    auto.
  destruct H1. split; auto.
Qed.

Lemma prel_bind : forall A B A' B' (R : A -> B -> Prop) (R' : A' -> B' -> Prop) L l f g,
  prel R L l -> (forall a b, R a b -> prel R' (f a) (g b)) ->
  prel R' (pbind L f) (flat_map g l).
Proof.
  induction L as [| |a L IH]; intros [|b l] f g H Hfg; simpl in *; try contradiction; auto.
  destruct H. apply prel_app; auto.
Qed.

Section Frag.
  Variable G : graph.
  Variable D : list pdef.
  Variables n m : nat.

  Definition frel (a : sol) (b : sol) : Prop :=
    (forall x, rd (fst a) (ident_map n) x = fst b x) /\
    (forall F, rd (snd a) (ident_map m) F = snd b F).

  Definition FR (p : pattern) : Prop :=
    in_frag n m p = true -> forall d B Θ Φ σ ψ t, frel (Θ, Φ) (σ, ψ) ->
      prel frel (psols G D d B Θ Φ p t (root_env n m)) (solutions G σ ψ p t).

  Lemma frel_upd_t : forall Θ Φ σ ψ x t, frel (Θ, Φ) (σ, ψ) -> x < n ->
    frel (upd Θ x t, Φ) (upd σ x t, ψ).
  Proof.
    intros Θ Φ σ ψ x t [H1 H2] Hx. split; auto. intros y. simpl in *.
    specialize (H1 y). unfold rd, upd in *. rewrite vfind_ident_map in *.
    destruct (Nat.eqb x y) eqn:E.
    - apply Nat.eqb_eq in E. subst. rewrite (proj2 (Nat.ltb_lt y n) Hx), Nat.eqb_refl.
      reflexivity.
    - destruct (Nat.ltb y n); auto. rewrite E. exact H1.
  Qed.

  Lemma frel_upd_f : forall Θ Φ σ ψ F f, frel (Θ, Φ) (σ, ψ) -> F < m ->
    frel (Θ, upd Φ F f) (σ, upd ψ F f).
  Proof.
    intros Θ Φ σ ψ F f [H1 H2] HF. split; auto. intros y. simpl in *.
    specialize (H2 y). unfold rd, upd in *. rewrite vfind_ident_map in *.
    destruct (Nat.eqb F y) eqn:E.
    - apply Nat.eqb_eq in E. subst. rewrite (proj2 (Nat.ltb_lt y m) HF), Nat.eqb_refl.
      reflexivity.
    - destruct (Nat.ltb y m); auto. rewrite E. exact H2.
  Qed.

  Lemma FR_list : forall ps, Forall FR ps -> forallb (in_frag n m) ps = true ->
    forall d B Θ Φ σ ψ ts, frel (Θ, Φ) (σ, ψ) ->
      prel frel (psols_list (fun Θ Φ q u => psols G D d B Θ Φ q u (root_env n m)) Θ Φ ps ts)
        (solutions_list G σ ψ ps ts).
  Proof.
    induction 1 as [|q ps Hq Hps IH]; intros Hf d B Θ Φ σ ψ ts Hr;
      destruct ts as [|u ts]; try solve [simpl; auto | simpl; split; [exact Hr | exact I]].
    simpl in Hf. apply andb_prop in Hf. destruct Hf as [Hf1 Hf2].
    rewrite solutions_list_cons, psols_list_cons.
    apply prel_bind with (R := frel); [apply Hq; auto|].
    intros [Θ1 Φ1] [σ1 ψ1] H. apply IH; auto.
  Qed.

  Lemma FR_all : forall p, FR p.
  Proof.
    intros p.
    induction p as [x|f ps Hps|p1 p2 IHp1 IHp2|p g IHp|x p IHp|F p IHp
                   |p p' x IHp1 IHp2|F ps Hps|P xs Fs] using pattern_ind';
      intros Hf d B Θ Φ σ ψ t Hr; simpl in Hf; try discriminate.
    - (* x *)
      apply Nat.ltb_lt in Hf. rewrite psols_var. simpl.
      rewrite vfind_ident_map, (proj2 (Nat.ltb_lt x n) Hf).
      pose proof (proj1 Hr x) as Hx. unfold rd in Hx. simpl in Hx.
      rewrite vfind_ident_map, (proj2 (Nat.ltb_lt x n) Hf) in Hx. rewrite <- Hx.
      destruct (Θ x) as [t'|]; [destruct (Nat.eqb t' t)|]; simpl; auto.
      split; auto. apply frel_upd_t; auto.
    - (* f(ps) *)
      rewrite psols_app.
      change (solutions G σ ψ (PApp f ps) t) with
        (if Nat.eqb (label G t) f then solutions_list G σ ψ ps (children G t) else []).
      destruct (Nat.eqb (label G t) f) eqn:E; simpl andb; [|exact I].
      destruct (Nat.eqb (length ps) (length (children G t))) eqn:El.
      + apply (FR_list ps Hps Hf d B Θ Φ σ ψ (children G t) Hr).
      + apply Nat.eqb_neq in El. rewrite (solutions_list_len G ps σ ψ _ El). simpl. auto.
    - (* ‖ *)
      apply andb_prop in Hf. destruct Hf. rewrite psols_alt. simpl. apply prel_app; auto.
    - (* guard *)
      rewrite psols_guard. simpl.
      replace (filter (fun s => guard_ok G (fst s) (snd s) g) (solutions G σ ψ p t))
        with (flat_map (fun s => if guard_ok G (fst s) (snd s) g then [s] else [])
                (solutions G σ ψ p t))
        by (induction (solutions G σ ψ p t) as [|a l IH]; simpl; auto;
            destruct (guard_ok G (fst a) (snd a) g); simpl; rewrite IH; reflexivity).
      apply prel_bind with (R := frel); [apply IHp; auto|].
      intros [Θ1 Φ1] [σ1 ψ1] [H1 H2]. cbn [fst snd tenv fenv root_env] in *.
      unfold guard_ok. rewrite (eval_guard_ext G _ σ1 _ ψ1 g H1 H2).
      destruct (eval_guard G σ1 ψ1 g) as [[|]|]; simpl; auto. split; auto. split; auto.
    - (* constraint *)
      apply andb_prop in Hf. destruct Hf as [Hf1 Hf2]. rewrite psols_constr. simpl.
      apply prel_bind with (R := frel); [apply IHp1; auto|].
      intros [Θ1 Φ1] [σ1 ψ1] [H1 H2]. simpl. simpl in H1. rewrite H1.
      destruct (σ1 x); simpl; auto. apply IHp2; auto. split; auto.
    - (* F(ps) *)
      apply andb_prop in Hf. destruct Hf as [HF Hf]. apply Nat.ltb_lt in HF.
      rewrite psols_funvar.
      change (solutions G σ ψ (PFunVar F ps) t) with
        (match ψ F with
         | Some f => if Nat.eqb f (label G t) then solutions_list G σ ψ ps (children G t) else []
         | None => solutions_list G σ (upd ψ F (label G t)) ps (children G t)
         end).
      cbn [fenv root_env]. rewrite vfind_ident_map, (proj2 (Nat.ltb_lt F m) HF).
      pose proof (proj2 Hr F) as HFr. unfold rd in HFr. simpl in HFr.
      rewrite vfind_ident_map, (proj2 (Nat.ltb_lt F m) HF) in HFr. rewrite <- HFr.
      destruct (Nat.eqb (length ps) (length (children G t))) eqn:El.
      + destruct (Φ F) as [f|].
        * destruct (Nat.eqb f (label G t)); simpl; auto.
          apply (FR_list ps Hps Hf d B Θ Φ σ ψ (children G t) Hr).
        * apply (FR_list ps Hps Hf d B Θ _ σ _ (children G t)). apply frel_upd_f; auto.
      + apply Nat.eqb_neq in El. pose proof (solutions_list_len G ps) as Hn.
        destruct (Φ F) as [f|]; [destruct (Nat.eqb f (label G t))|];
          rewrite ?Hn by exact El; simpl; auto.
  Qed.
End Frag.

(** The whole-calculus specification extends the fragment's: for a
    pattern of the fragment, [solutions_k] has no cut, whatever the depth,
    and is [solutions] element by element (read through the root's
    scope). *)
Theorem solutions_k_frag : forall G D K n m p t,
  in_frag n m p = true ->
  prel (fun a b => (forall x, fst a x = fst b x) /\ (forall F, snd a F = snd b F))
    (solutions_k G D K n m p t) (solutions G none_t none_f p t).
Proof.
  intros G D K n m p t Hf.
  assert (H : prel (frel n m) (psols G D K (max n m) none_t none_f p t (root_env n m))
                (solutions G none_t none_f p t)).
  { apply (FR_all G D n m p Hf). split; intros y; unfold rd; simpl;
      destruct (vfind y _); reflexivity. }
  unfold solutions_k. revert H. generalize (solutions G none_t none_f p t).
  induction (psols G D K (max n m) none_t none_f p t (root_env n m)) as [| |a L IH];
    intros [|b l] H; simpl in *; auto. destruct H as [[H1 H2] H3]. auto.
Qed.

(** ** Deeper unfolding only refines the cuts *)

(** [pprefix L L']: [L'] is [L] with its cut (if any) replaced by a
    partial list. *)
Fixpoint pprefix {A} (L L' : plist A) : Prop :=
  match L, L' with
  | PCut, _ => True
  | PNil, PNil => True
  | PCons a l, PCons a' l' => a = a' /\ pprefix l l'
  | _, _ => False
  end.

Lemma pprefix_refl : forall A (L : plist A), pprefix L L.
Proof. induction L; simpl; auto. Qed.

Lemma pprefix_papp : forall A (l1 l1' l2 l2' : plist A),
  pprefix l1 l1' -> pprefix l2 l2' -> pprefix (papp l1 l2) (papp l1' l2').
Proof.
  induction l1 as [| |a l1 IH]; intros [| |a' l1'] l2 l2' H1 H2; simpl in *;
    try contradiction; auto.
  destruct H1 as [-> H1]. split; auto.
Qed.

Lemma pprefix_pbind : forall A B (L L' : plist A) (f g : A -> plist B),
  pprefix L L' -> (forall a, pprefix (f a) (g a)) -> pprefix (pbind L f) (pbind L' g).
Proof.
  induction L as [| |a L IH]; intros [| |a' L'] f g H Hfg; simpl in *;
    try contradiction; auto.
  destruct H as [-> H]. apply pprefix_papp; auto.
Qed.

Section Mono.
  Variable G : graph.
  Variable D : list pdef.

  Definition MP (d : nat) (p : pattern) : Prop :=
    forall d' B Θ Φ t ρ, d <= d' ->
      pprefix (psols G D d B Θ Φ p t ρ) (psols G D d' B Θ Φ p t ρ).

  Lemma MP_list : forall d ps, Forall (MP d) ps ->
    forall d' B Θ Φ ts ρ, d <= d' ->
      pprefix (psols_list (fun Θ Φ q u => psols G D d B Θ Φ q u ρ) Θ Φ ps ts)
              (psols_list (fun Θ Φ q u => psols G D d' B Θ Φ q u ρ) Θ Φ ps ts).
  Proof.
    intros d ps H. induction H as [|q ps Hq Hps IH]; intros d' B Θ Φ ts ρ Hle;
      destruct ts as [|u ts]; try solve [simpl; auto | simpl; split; auto].
    rewrite !psols_list_cons. apply pprefix_pbind; [apply Hq; auto|].
    intros s. apply IH; auto.
  Qed.

  Lemma MP_gen : forall d, (forall d0, d = S d0 -> forall p, MP d0 p) -> forall p, MP d p.
  Proof.
    intros d IHd p.
    induction p as [x|f ps Hps|p1 p2 IHp1 IHp2|p g IHp|x p IHp|F p IHp
                   |p p' x IHp1 IHp2|F ps Hps|P xs Fs] using pattern_ind';
      intros d' B Θ Φ t ρ Hle.
    - rewrite !psols_var. apply pprefix_refl.
    - rewrite !psols_app. destruct (_ && _); [apply MP_list; auto | exact I].
    - rewrite !psols_alt. apply pprefix_papp; auto.
    - rewrite !psols_guard. apply pprefix_pbind; auto. intros s. apply pprefix_refl.
    - rewrite !psols_exists. apply pprefix_pbind; auto. intros s. apply pprefix_refl.
    - rewrite !psols_existsf. apply pprefix_pbind; auto. intros s. apply pprefix_refl.
    - rewrite !psols_constr. apply pprefix_pbind; auto.
      intros s. destruct (rd (fst s) (tenv ρ) x); simpl; auto.
    - rewrite !psols_funvar. destruct (Nat.eqb _ _); [|exact I].
      destruct (vfind F (fenv ρ)) as [s|]; [|exact I].
      destruct (Φ s) as [f|]; [destruct (Nat.eqb f _); [|exact I]|]; apply MP_list; auto.
    - destruct d as [|d0]; [rewrite psols_call0; exact I|].
      destruct d' as [|d0']; [lia|]. rewrite !psols_callS.
      destruct (nth_error D P) as [dd|]; [|exact I].
      destruct (_ && _); [|exact I]. apply (IHd d0 eq_refl). lia.
  Qed.

  Lemma psols_mono : forall d p, MP d p.
  Proof.
    induction d as [|d IH]; apply MP_gen; intros d0 E; [discriminate|].
    injection E as <-. exact IH.
  Qed.
End Mono.

(** The depth-[K] lists are approximations of one (possibly infinite)
    list: unfolding deeper keeps every solution known at depth [K], in its
    place, and only replaces the cut. In particular earlier alternates gain
    no solutions: where they could, there was a cut. *)
Theorem solutions_k_mono : forall G D K K' n m p t,
  K <= K' -> pprefix (solutions_k G D K n m p t) (solutions_k G D K' n m p t).
Proof.
  intros G D K K' n m p t Hle. unfold solutions_k.
  generalize (psols_mono G D K p K' (max n m) none_t none_f t (root_env n m) Hle).
  generalize (psols G D K' (max n m) none_t none_f p t (root_env n m)).
  induction (psols G D K (max n m) none_t none_f p t (root_env n m)) as [| |a L IH];
    intros [| |a' L'] H; simpl in *; try contradiction; auto.
  destruct H as [-> H]. split; auto.
Qed.
