(** * Entry points: what the library answers, as proved functions

    Every answer of the shared library comes from a function of this file
    (docs/guarantees/correspondence.md has the table, C entry point -> function ->
    theorem):

    - [match_root G D fuel r t]: definition [r] of the table [D] at node
      [t]. First the root-operator index ([RootIndex.root_index]): if the
      definition's root cannot have [t]'s operator, the answer is
      [RNoMatch] (a proved "no", [match_root_index_no]) without running the
      machine. Otherwise the machine runs ([match_pattern], the start state
      [Algorithmic.init]) and its result is projected on the definition's
      parameters ([project]: the bindings of slots [0..n-1], increasing).
      Theorems: [match_root_sound], [match_root_fail_sound],
      [match_root_out_of_fuel], and [match_root_decided] (the index only
      ever turns an [OOutOfFuel] of the machine into [RNoMatch]).
    - [match_all G D fuel roots N]: every node [0..N-1] (increasing) ×
      every root (in order), the entries whose answer is not [RNoMatch]
      ([match_all_In], [match_all_nil], [match_all_cons] fix the order).
    - [candidates D roots f]: the roots (positions, increasing) whose index
      allows operator [f]; [candidates_sound]: a root that is not a
      candidate for [t]'s operator answers [RNoMatch] at [t] and has no
      declarative match there.

    The library runs the "prepared" forms, which compute the index and
    each root's start environment once per pattern set: [load_set],
    [set_match], [set_match_all] (and its streaming form
    [set_match_all_fold]), [set_candidates]; [set_match_correct],
    [set_match_all_correct], [set_match_all_fold_correct] and
    [set_candidates_correct] say they are the functions above. *)

From Coq Require Import ZArith List Bool Arith Lia Sorted.
From PyPM Require Import Syntax Subst Declarative Env Algorithmic Interpreter Soundness RootIndex
  KidIndex.
Import ListNotations.

(** ** Answers *)

Inductive answer :=
| RMatch (bs : list (var * node)) (fbs : list (fvar * symbol))
    (** the bindings of the root definition's parameters, by variable *)
| RNoMatch
| ROutOfFuel.

(** The bindings of slots [i .. i+k-1], in increasing order. *)
Fixpoint project_from (Θ : subst) (i k : nat) : list (nat * nat) :=
  match k with
  | O => []
  | S k' =>
      match lookup i Θ with
      | Some v => (i, v) :: project_from Θ (S i) k'
      | None => project_from Θ (S i) k'
      end
  end.

Definition project (Θ : subst) (n : nat) : list (nat * nat) := project_from Θ 0 n.

(** A binding list read as a substitution. *)
Fixpoint assoc (l : list (nat * nat)) (x : nat) : option nat :=
  match l with
  | [] => None
  | (y, v) :: l' => if Nat.eqb x y then Some v else assoc l' x
  end.

Definition answer_of (n m : nat) (o : outcome) : answer :=
  match o with
  | OSuccess Θ Φ => RMatch (project Θ n) (project Φ m)
  | OFailure => RNoMatch
  | OOutOfFuel => ROutOfFuel
  end.

(** [2^k] by doubling (extracted [Nat.add] is OCaml's [+]; [Nat.pow] and
    [Nat.mul] would be unary). *)
Fixpoint pow2 (k : nat) : nat := match k with O => 1 | S k' => let p := pow2 k' in p + p end.

Lemma pow2_pow : forall k, pow2 k = Nat.pow 2 k.
Proof. induction k as [|k IH]; simpl; lia. Qed.

(** The default fuel of the C API ([fuel <= 0] means it): [2^26] steps (the shipped attention family's proved bound is 42,857,164). *)
Definition default_fuel : nat := pow2 26.
Definition effective_fuel (fuel : nat) : nat :=
  match fuel with O => default_fuel | _ => fuel end.

(** ** The specification-level entry points *)

Section Entry.
  Variable G : graph.
  Variable D : list pdef.

  Definition match_root (fuel : nat) (r : nat) (t : node) : answer :=
    match nth_error D r with
    | None => RNoMatch
    | Some d =>
        if admits G t (ri_find (root_index D) r)
        then answer_of (nparams d) (nfparams d)
               (match_pattern G D fuel (nparams d) (nfparams d) (body d) t)
        else RNoMatch
    end.

  (** The entries of one node: root [i] (position in [roots]) at [t]. *)
  Definition keep (i : nat) (t : node) (a : answer) : list (nat * node * answer) :=
    match a with RNoMatch => [] | _ => [(i, t, a)] end.

  Fixpoint at_node (fuel : nat) (roots : list nat) (i : nat) (t : node)
    : list (nat * node * answer) :=
    match roots with
    | [] => []
    | r :: rs => keep i t (match_root fuel r t) ++ at_node fuel rs (S i) t
    end.

  (** Nodes [0 .. N-1] in increasing order; at each node, the roots in
      order; the entries that are not [RNoMatch]. *)
  Definition match_all (fuel : nat) (roots : list nat) (N : nat)
    : list (nat * node * answer) :=
    flat_map (fun t => at_node fuel roots 0 t) (seq 0 N).

  (** The roots whose index admits operator [f], whose attributes are
      [sa] ([sym_attrs G f] for a node labelled [f]). *)
  Fixpoint cands_from (sa : attribute -> option Z) (f : symbol) (roots : list nat) (i : nat)
    : list nat :=
    match roots with
    | [] => []
    | r :: rs =>
        if rs_mem sa f (ri_find (root_index D) r) then i :: cands_from sa f rs (S i)
        else cands_from sa f rs (S i)
    end.

  Definition candidates (roots : list nat) (f : symbol) (sa : attribute -> option Z)
    : list nat := cands_from sa f roots 0.

  (** The roots whose root index admits operator [f] (attributes [sa]) and
      whose children's index ([KidIndex.kid_index]) admits arguments of
      operators [ks] (each with its attributes; [kid_syms G t] for a node
      [t]). *)
  Fixpoint kcands_from (sa : attribute -> option Z) (f : symbol)
      (ks : list (symbol * (attribute -> option Z))) (roots : list nat) (i : nat) : list nat :=
    match roots with
    | [] => []
    | r :: rs =>
        if rs_mem sa f (ri_find (root_index D) r)
           && k_mem (ki_find (kid_index D (root_index D)) r) f sa ks
        then i :: kcands_from sa f ks rs (S i)
        else kcands_from sa f ks rs (S i)
    end.

  Definition candidates_at (roots : list nat) (f : symbol) (sa : attribute -> option Z)
      (ks : list (symbol * (attribute -> option Z))) : list nat := kcands_from sa f ks roots 0.

  (** ** Projection *)

  Lemma assoc_project_from : forall Θ k i x,
    assoc (project_from Θ i k) x =
      if Nat.leb i x && Nat.ltb x (i + k) then lookup x Θ else None.
  Proof.
    intros Θ k. induction k as [|k IH]; intros i x; simpl.
    - destruct (Nat.leb i x) eqn:L1; destruct (Nat.ltb x (i + 0)) eqn:L2;
        rewrite ?Nat.leb_le, ?Nat.leb_gt, ?Nat.ltb_lt, ?Nat.ltb_ge in *;
        simpl; auto; lia.
    - destruct (lookup i Θ) eqn:E; simpl; [destruct (Nat.eqb x i) eqn:Ex|]; rewrite ?IH.
      + apply Nat.eqb_eq in Ex. subst. rewrite Nat.leb_refl.
        destruct (Nat.ltb i (i + S k)) eqn:L; [exact (eq_sym E)|].
        apply Nat.ltb_ge in L. lia.
      + apply Nat.eqb_neq in Ex.
        destruct (Nat.leb (S i) x) eqn:L1; destruct (Nat.leb i x) eqn:L2;
          destruct (Nat.ltb x (S i + k)) eqn:L3; destruct (Nat.ltb x (i + S k)) eqn:L4;
          rewrite ?Nat.leb_le, ?Nat.leb_gt, ?Nat.ltb_lt, ?Nat.ltb_ge in *;
          simpl; auto; lia.
      + destruct (Nat.eqb x i) eqn:Ex.
        * apply Nat.eqb_eq in Ex. subst.
          destruct (Nat.leb (S i) i) eqn:L1; [apply Nat.leb_le in L1; lia|].
          simpl. rewrite E. destruct (Nat.leb i i && Nat.ltb i (i + S k)); reflexivity.
        * apply Nat.eqb_neq in Ex.
          destruct (Nat.leb (S i) x) eqn:L1; destruct (Nat.leb i x) eqn:L2;
            destruct (Nat.ltb x (S i + k)) eqn:L3; destruct (Nat.ltb x (i + S k)) eqn:L4;
            rewrite ?Nat.leb_le, ?Nat.leb_gt, ?Nat.ltb_lt, ?Nat.ltb_ge in *;
            simpl; auto; lia.
  Qed.

  (** The projection is the root scope's view of the machine's slots. *)
  Lemma assoc_project : forall Θ n x, assoc (project Θ n) x = gsub Θ (ident_map n) x.
  Proof.
    intros Θ n x. unfold project. rewrite assoc_project_from. unfold gsub.
    rewrite vfind_ident_map. simpl. destruct (Nat.ltb x n); reflexivity.
  Qed.

  Lemma project_from_In : forall Θ k i x v,
    In (x, v) (project_from Θ i k) -> i <= x < i + k /\ lookup x Θ = Some v.
  Proof.
    intros Θ k. induction k as [|k IH]; intros i x v H; simpl in H; [destruct H|].
    destruct (lookup i Θ) eqn:E.
    - destruct H as [H|H].
      + inversion H; subst. split; [lia | exact E].
      + apply IH in H. destruct H. split; [lia | auto].
    - apply IH in H. destruct H. split; [lia | auto].
  Qed.

  Lemma project_from_sorted : forall Θ k i,
    StronglySorted (fun a b => fst a < fst b) (project_from Θ i k).
  Proof.
    intros Θ k. induction k as [|k IH]; intros i; simpl; [constructor|].
    destruct (lookup i Θ) eqn:E; auto.
    constructor; auto. apply Forall_forall. intros [x v] H.
    apply project_from_In in H. simpl. lia.
  Qed.

  (** ** match_root *)

  (** A match: the bindings, read as substitutions, satisfy the
      declarative relation; they are sorted by variable and bind only the
      definition's parameters. *)
  Theorem match_root_sound : forall fuel r t bs fbs,
    match_root fuel r t = RMatch bs fbs ->
    exists d, nth_error D r = Some d /\
      matches G D (assoc bs) (assoc fbs) (body d) t /\
      (forall x v, In (x, v) bs -> x < nparams d) /\
      (forall F f, In (F, f) fbs -> F < nfparams d) /\
      StronglySorted (fun a b => fst a < fst b) bs /\
      StronglySorted (fun a b => fst a < fst b) fbs.
  Proof.
    intros fuel r t bs fbs H. unfold match_root in H.
    destruct (nth_error D r) as [d|] eqn:Hd; [|discriminate].
    destruct (admits G t (ri_find (root_index D) r)); [|discriminate].
    destruct (match_pattern G D fuel (nparams d) (nfparams d) (body d) t) as [Θ Φ| |]
      eqn:Hm; simpl in H; try discriminate.
    inversion H; subst. exists d. repeat split; auto.
    - apply match_pattern_sound in Hm.
      eapply matches_ext; [| |exact Hm]; intros y; unfold tsub, fsub, root_env; simpl;
        rewrite assoc_project; reflexivity.
    - intros x v Hx. apply project_from_In in Hx. lia.
    - intros x v Hx. apply project_from_In in Hx. lia.
    - apply project_from_sorted.
    - apply project_from_sorted.
  Qed.

  (** A definition whose index does not allow the node's operator: no
      match, for every substitution, and [RNoMatch] whatever the fuel. *)
  Theorem match_root_index_no : forall fuel r t d,
    nth_error D r = Some d ->
    admits G t (ri_find (root_index D) r) = false ->
    match_root fuel r t = RNoMatch /\ forall σ ψ, ~ matches G D σ ψ (body d) t.
  Proof.
    intros fuel r t d Hd Hno. split.
    - unfold match_root. rewrite Hd, Hno. reflexivity.
    - intros σ ψ. eapply root_index_no_match; eauto.
  Qed.

  (** No match: no substitution of the parameters matches. *)
  Theorem match_root_fail_sound : forall fuel r t d,
    wf_defs D = true -> nth_error D r = Some d ->
    match_root fuel r t = RNoMatch ->
    forall σ ψ, (forall x, nparams d <= x -> σ x = None) ->
                (forall F, nfparams d <= F -> ψ F = None) ->
    ~ matches G D σ ψ (body d) t.
  Proof.
    intros fuel r t d Hwf Hd H σ ψ Hσ Hψ. unfold match_root in H. rewrite Hd in H.
    destruct (admits G t (ri_find (root_index D) r)) eqn:Hi.
    - destruct (match_pattern G D fuel (nparams d) (nfparams d) (body d) t) eqn:Hm;
        simpl in H; try discriminate.
      eapply match_pattern_fail_sound; eauto.
      unfold wf_defs in Hwf. rewrite forallb_forall in Hwf.
      assert (Hw : wf_def D d = true) by (apply Hwf; eapply nth_error_In; eauto).
      unfold wf_def in Hw. apply andb_true_iff in Hw. destruct Hw as [Hw _].
      apply andb_true_iff in Hw. destruct Hw as [Hw _].
      apply andb_true_iff in Hw. destruct Hw as [Hw _]. exact Hw.
    - eapply root_index_no_match; eauto.
  Qed.

  (** Scope is part of [wf_defs]: "no match" holds of every substitution,
      not only of those binding the parameters alone ([matches_params]). *)
  Theorem match_root_fail_sound_any : forall fuel r t d,
    wf_defs D = true -> nth_error D r = Some d ->
    match_root fuel r t = RNoMatch ->
    forall σ ψ, ~ matches G D σ ψ (body d) t.
  Proof.
    intros fuel r t d Hwf Hd H σ ψ Hm.
    apply (match_root_fail_sound fuel r t d Hwf Hd H
             (restrict (fun x => Nat.ltb x (nparams d)) σ)
             (restrict (fun F => Nat.ltb F (nfparams d)) ψ));
      [intros; apply restrict_below; assumption | intros; apply restrict_below; assumption |].
    eapply matches_params; eauto.
  Qed.

  (** Out of fuel: the machine ran out of fuel ([run_out_of_fuel] says
      what that means: still running after [fuel] steps). *)
  Theorem match_root_out_of_fuel : forall fuel r t,
    match_root fuel r t = ROutOfFuel ->
    exists d, nth_error D r = Some d /\
      match_pattern G D fuel (nparams d) (nfparams d) (body d) t = OOutOfFuel.
  Proof.
    intros fuel r t H. unfold match_root in H.
    destruct (nth_error D r) as [d|]; [|discriminate].
    destruct (admits _ _ _); [|discriminate]. exists d. split; auto.
    destruct (match_pattern G D fuel (nparams d) (nfparams d) (body d) t);
      simpl in H; congruence.
  Qed.

  (** The index decides nothing the machine decides: whenever the machine
      answers (match or failure), [match_root] gives that answer. The index
      only turns some [OOutOfFuel] into [RNoMatch]. *)
  Theorem match_root_decided : forall fuel r t d o,
    nth_error D r = Some d ->
    match_pattern G D fuel (nparams d) (nfparams d) (body d) t = o -> o <> OOutOfFuel ->
    match_root fuel r t = answer_of (nparams d) (nfparams d) o.
  Proof.
    intros fuel r t d o Hd Hm Ho. unfold match_root. rewrite Hd, Hm.
    destruct (admits G t (ri_find (root_index D) r)) eqn:Hi; auto.
    destruct o as [Θ Φ| |]; auto; [|congruence].
    apply match_pattern_sound in Hm.
    rewrite (root_index_sound G D r d _ _ t Hd Hm) in Hi. discriminate.
  Qed.

  (** With enough fuel, [match_root] reaches whatever the machine reaches
      (the index never hides a match). *)
  Corollary match_root_complete : forall r t d Θ Φ,
    nth_error D r = Some d ->
    star G D (init (nparams d) (nfparams d) (body d) t) (Success Θ Φ) ->
    exists fuel, match_root fuel r t =
      RMatch (project Θ (nparams d)) (project Φ (nfparams d)).
  Proof.
    intros r t d Θ Φ Hd Hs. destruct (proj1 (run_complete G D _ _ Hs) Θ Φ eq_refl)
      as [fuel Hf].
    exists fuel. erewrite match_root_decided; eauto; [reflexivity | discriminate].
  Qed.

  (** ** match_all *)

  Lemma In_keep : forall i t a e, In e (keep i t a) <-> e = (i, t, a) /\ a <> RNoMatch.
  Proof.
    intros i t a e. unfold keep. destruct a; simpl;
      split; intros H; try tauto; try (destruct H; subst; auto; congruence);
      destruct H as [H|[]]; subst; split; auto; discriminate.
  Qed.

  Lemma In_at_node : forall fuel roots i t e,
    In e (at_node fuel roots i t) <->
    exists j r a, nth_error roots j = Some r /\ match_root fuel r t = a /\ a <> RNoMatch /\
                  e = (i + j, t, a).
  Proof.
    intros fuel roots. induction roots as [|r rs IH]; intros i t e; simpl.
    - split; [intros []|]. intros (j & r & a & H & _). destruct j; discriminate.
    - rewrite in_app_iff, In_keep, IH. split.
      + intros [[-> Ha]|(j & r' & a & H1 & H2 & H3 & ->)].
        * exists 0, r, (match_root fuel r t). rewrite Nat.add_0_r. auto.
        * exists (S j), r', a. replace (i + S j) with (S i + j) by lia. auto.
      + intros (j & r' & a & H1 & H2 & H3 & ->). destruct j as [|j]; simpl in H1.
        * inversion H1; subst. left. rewrite Nat.add_0_r. auto.
        * right. exists j, r', a.
          replace (i + S j) with (S i + j) by lia. auto.
  Qed.

  (** Every entry of [match_all] is [match_root]'s answer for its node and
      root, and every such answer that is not [RNoMatch] is an entry. *)
  Theorem match_all_In : forall fuel roots N i t a,
    In (i, t, a) (match_all fuel roots N) <->
    t < N /\ exists r, nth_error roots i = Some r /\ match_root fuel r t = a /\ a <> RNoMatch.
  Proof.
    intros fuel roots N i t a. unfold match_all. rewrite in_flat_map. split.
    - intros (t' & Ht & He). apply in_seq in Ht. apply In_at_node in He.
      destruct He as (j & r & a' & H1 & H2 & H3 & H4). inversion H4; subst.
      split; [lia|]. exists r. auto.
    - intros (Ht & r & H1 & H2 & H3). exists t. split; [apply in_seq; lia|].
      apply In_at_node. exists i, r, a. auto.
  Qed.

  (** The order: node by node ([seq 0 N]), and at a node root by root. *)
  Lemma match_all_nil : forall fuel roots, match_all fuel roots 0 = [].
  Proof. reflexivity. Qed.

  Lemma match_all_S : forall fuel roots N,
    match_all fuel roots (S N) = match_all fuel roots N ++ at_node fuel roots 0 N.
  Proof.
    intros. unfold match_all. rewrite seq_S, flat_map_app. simpl. rewrite app_nil_r.
    reflexivity.
  Qed.

  (** ** candidates *)

  Lemma In_cands_from : forall sa f roots i j,
    In j (cands_from sa f roots i) <->
    exists k r, j = i + k /\ nth_error roots k = Some r /\
                rs_mem sa f (ri_find (root_index D) r) = true.
  Proof.
    intros sa f roots. induction roots as [|r rs IH]; intros i j; simpl.
    - split; [intros []|]. intros (k & r & _ & H & _). destruct k; discriminate.
    - destruct (rs_mem sa f (ri_find (root_index D) r)) eqn:E; simpl; rewrite ?IH; split.
      + intros [<-|(k & r' & -> & H1 & H2)].
        * exists 0, r. rewrite Nat.add_0_r. auto.
        * exists (S k), r'. split; [lia | auto].
      + intros (k & r' & -> & H1 & H2). destruct k as [|k]; simpl in H1.
        * left. inversion H1; subst. lia.
        * right. exists k, r'. split; [lia | auto].
      + intros (k & r' & -> & H1 & H2). exists (S k), r'. split; [lia | auto].
      + intros (k & r' & -> & H1 & H2). destruct k as [|k]; simpl in H1.
        * inversion H1; subst. congruence.
        * exists k, r'. split; [lia | auto].
  Qed.

  Theorem candidates_In : forall roots f sa i,
    In i (candidates roots f sa) <->
    exists r, nth_error roots i = Some r /\ rs_mem sa f (ri_find (root_index D) r) = true.
  Proof.
    intros roots f sa i. unfold candidates. rewrite In_cands_from. split.
    - intros (k & r & -> & H). exists r. auto.
    - intros (r & H). exists i, r. auto.
  Qed.

  (** Skipping the roots that are not candidates for a node's operator
      (with its attributes) loses nothing: they answer [RNoMatch] there,
      whatever the fuel, and have no declarative match. *)
  Theorem candidates_sound : forall roots i r t fuel,
    nth_error roots i = Some r ->
    ~ In i (candidates roots (label G t) (sym_attrs G (label G t))) ->
    match_root fuel r t = RNoMatch /\
    forall d σ ψ, nth_error D r = Some d -> ~ matches G D σ ψ (body d) t.
  Proof.
    intros roots i r t fuel Hr Hc.
    assert (Hno : admits G t (ri_find (root_index D) r) = false).
    { unfold admits. destruct (rs_mem _ _ _) eqn:E; auto. exfalso. apply Hc.
      apply candidates_In. eauto. }
    split.
    - unfold match_root. destruct (nth_error D r); auto. rewrite Hno. reflexivity.
    - intros d σ ψ Hd. eapply root_index_no_match; eauto.
  Qed.

  Lemma In_kcands_from : forall sa f ks roots i j,
    In j (kcands_from sa f ks roots i) ->
    exists k r, j = i + k /\ nth_error roots k = Some r /\
                rs_mem sa f (ri_find (root_index D) r) = true /\
                k_mem (ki_find (kid_index D (root_index D)) r) f sa ks = true.
  Proof.
    intros sa f ks roots. induction roots as [|r rs IH]; intros i j H; simpl in H; [contradiction|].
    destruct (rs_mem sa f (ri_find (root_index D) r)) eqn:E1;
      destruct (k_mem (ki_find (kid_index D (root_index D)) r) f sa ks) eqn:E2; simpl in H;
      try (destruct H as [<-|H]; [exists 0, r; rewrite Nat.add_0_r; auto|]);
      apply IH in H; destruct H as (k & r' & -> & H1 & H2 & H3);
      exists (S k), r'; (split; [lia | auto]).
  Qed.

  Lemma kcands_from_In : forall sa f ks roots i k r,
    nth_error roots k = Some r ->
    rs_mem sa f (ri_find (root_index D) r) = true ->
    k_mem (ki_find (kid_index D (root_index D)) r) f sa ks = true ->
    In (i + k) (kcands_from sa f ks roots i).
  Proof.
    intros sa f ks roots. induction roots as [|r0 rs IH]; intros i k r Hn H1 H2;
      [destruct k; discriminate|].
    destruct k as [|k]; simpl in Hn |- *.
    - inversion Hn; subst. rewrite H1, H2. simpl. left. lia.
    - replace (i + S k) with (S i + k) by lia.
      destruct (_ && _); [right|]; eapply IH; eauto.
  Qed.

  (** Skipping the roots that are not candidates for a node's operator and
      its arguments' operators loses nothing: they have no declarative
      match there, so the matcher answers no match ([match_root_sound]). *)
  Theorem candidates_at_sound : forall roots i r t,
    nth_error roots i = Some r ->
    ~ In i (candidates_at roots (label G t) (sym_attrs G (label G t)) (kid_syms G t)) ->
    (forall d σ ψ, nth_error D r = Some d -> ~ matches G D σ ψ (body d) t) /\
    (forall fuel bs fbs, match_root fuel r t <> RMatch bs fbs).
  Proof.
    intros roots i r t Hr Hc.
    assert (Hno : forall d σ ψ, nth_error D r = Some d -> ~ matches G D σ ψ (body d) t).
    { intros d σ ψ Hd Hm. apply Hc. unfold candidates_at.
      replace i with (0 + i) by reflexivity. eapply kcands_from_In; eauto.
      - pose proof (root_index_sound G D r d σ ψ t Hd Hm) as Ha. exact Ha.
      - eapply kid_index_sound; eauto. }
    split; [exact Hno|].
    intros fuel bs fbs Hm. apply match_root_sound in Hm.
    destruct Hm as (d & Hd & Hm & _). exact (Hno d _ _ Hd Hm).
  Qed.

  (** [candidates_at] keeps only candidates of [candidates]. *)
  Lemma candidates_at_incl : forall roots f sa ks i,
    In i (candidates_at roots f sa ks) -> In i (candidates roots f sa).
  Proof.
    intros roots f sa ks i H. apply In_kcands_from in H.
    destruct H as (k & r & -> & H1 & H2 & _). apply candidates_In. eauto.
  Qed.
End Entry.

(** ** The prepared forms the library runs *)

(** A root prepared once per pattern set: its definition, the root scope,
    the first fresh slot ([Algorithmic.init]'s [max n m]) and its index. *)
Record proot := mkProot {
  pr_def : pdef;
  pr_env : env;
  pr_nf : nat;
  pr_syms : rootset
}.

Record pset := mkPset {
  ps_defs : list pdef;
  ps_roots : list proot
}.

Definition prepare_root (D : list pdef) (R : rindex) (r : nat) : option proot :=
  match nth_error D r with
  | None => None
  | Some d =>
      Some (mkProot d (root_env (nparams d) (nfparams d))
              (max (nparams d) (nfparams d)) (ri_find R r))
  end.

Fixpoint prepare_roots (D : list pdef) (R : rindex) (roots : list nat) : option (list proot) :=
  match roots with
  | [] => Some []
  | r :: rs =>
      match prepare_root D R r, prepare_roots D R rs with
      | Some pr, Some prs => Some (pr :: prs)
      | _, _ => None
      end
  end.

(** [None] if a root names no definition (the decoder rejects that). *)
Definition load_set (D : list pdef) (roots : list nat) : option pset :=
  match prepare_roots D (root_index D) roots with
  | Some prs => Some (mkPset D prs)
  | None => None
  end.

Section Prepared.
  Variable G : graph.

  Definition run_root (D : list pdef) (fuel : nat) (pr : proot) (t : node) : answer :=
    if admits G t (pr_syms pr) then
      answer_of (nparams (pr_def pr)) (nfparams (pr_def pr))
        (run G D fuel (Running empty empty (pr_nf pr) []
                         [AMatch (body (pr_def pr)) t (pr_env pr)]))
    else RNoMatch.

  (** [pypm_match]: root [i] of the set at node [t]. *)
  Definition set_match (ps : pset) (fuel : nat) (i : nat) (t : node) : answer :=
    match nth_error (ps_roots ps) i with
    | Some pr => run_root (ps_defs ps) fuel pr t
    | None => RNoMatch
    end.

  Fixpoint entries_from (D : list pdef) (fuel : nat) (prs : list proot) (i : nat) (t : node)
      (acc : list (nat * node * answer)) : list (nat * node * answer) :=
    match prs with
    | [] => acc
    | pr :: prs' =>
        match run_root D fuel pr t with
        | RNoMatch => entries_from D fuel prs' (S i) t acc
        | a => (i, t, a) :: entries_from D fuel prs' (S i) t acc
        end
    end.

  (** Nodes [k-1] down to [0], each one's entries put in front: the result
      is in increasing node order (a tail-recursive loop). *)
  Fixpoint nodes_from (D : list pdef) (fuel : nat) (prs : list proot) (k : nat)
      (acc : list (nat * node * answer)) : list (nat * node * answer) :=
    match k with
    | O => acc
    | S k' => nodes_from D fuel prs k' (entries_from D fuel prs 0 k' acc)
    end.

  (** [pypm_match_all] *)
  Definition set_match_all (ps : pset) (fuel : nat) (N : nat) : list (nat * node * answer) :=
    nodes_from (ps_defs ps) fuel (ps_roots ps) N [].

  (** [pypm_match_all] as the library runs it: [f] is applied to the
      entries one by one, in [set_match_all]'s order
      ([set_match_all_fold_correct]), so that the library writes each entry
      into the result buffer at once instead of holding the list. *)
  Fixpoint fold_roots {A : Type} (f : A -> nat -> node -> answer -> A) (D : list pdef)
      (fuel : nat) (prs : list proot) (i : nat) (t : node) (acc : A) : A :=
    match prs with
    | [] => acc
    | pr :: prs' =>
        let acc' := match run_root D fuel pr t with
                    | RNoMatch => acc
                    | a => f acc i t a
                    end in
        fold_roots f D fuel prs' (S i) t acc'
    end.

  (** Nodes [t], [t+1], …, [t+k-1] (a tail-recursive loop). *)
  Fixpoint fold_nodes {A : Type} (f : A -> nat -> node -> answer -> A) (D : list pdef)
      (fuel : nat) (prs : list proot) (k : nat) (t : node) (acc : A) : A :=
    match k with
    | O => acc
    | S k' => fold_nodes f D fuel prs k' (S t) (fold_roots f D fuel prs 0 t acc)
    end.

  Definition set_match_all_fold {A : Type} (ps : pset) (fuel : nat) (N : nat)
      (f : A -> nat -> node -> answer -> A) (acc : A) : A :=
    fold_nodes f (ps_defs ps) fuel (ps_roots ps) N 0 acc.

  Fixpoint pcands_from (sa : attribute -> option Z) (f : symbol) (prs : list proot) (i : nat)
    : list nat :=
    match prs with
    | [] => []
    | pr :: prs' =>
        if rs_mem sa f (pr_syms pr) then i :: pcands_from sa f prs' (S i)
        else pcands_from sa f prs' (S i)
    end.

  (** [pypm_candidates]: [sa] is the operator's attributes the caller gives. *)
  Definition set_candidates (ps : pset) (f : symbol) (sa : attribute -> option Z) : list nat :=
    pcands_from sa f (ps_roots ps) 0.

  (** *** Correctness of the prepared forms *)

  Lemma prepare_roots_spec : forall D R roots prs,
    prepare_roots D R roots = Some prs ->
    Forall2 (fun r pr => prepare_root D R r = Some pr) roots prs.
  Proof.
    intros D R roots. induction roots as [|r rs IH]; intros prs H; simpl in H.
    - inversion H. constructor.
    - destruct (prepare_root D R r) eqn:E1; [|discriminate].
      destruct (prepare_roots D R rs) eqn:E2; [|discriminate].
      inversion H; subst. constructor; auto.
  Qed.

  Lemma run_root_prepared : forall D fuel r pr t,
    prepare_root D (root_index D) r = Some pr ->
    run_root D fuel pr t = match_root G D fuel r t.
  Proof.
    intros D fuel r pr t H. unfold prepare_root in H.
    destruct (nth_error D r) as [d|] eqn:Hd; [|discriminate].
    inversion H; subst. unfold run_root, match_root. simpl. rewrite Hd.
    reflexivity.
  Qed.

  Lemma load_set_roots : forall D roots ps,
    load_set D roots = Some ps ->
    ps_defs ps = D /\
    Forall2 (fun r pr => prepare_root D (root_index D) r = Some pr) roots (ps_roots ps).
  Proof.
    intros D roots ps H. unfold load_set in H.
    destruct (prepare_roots D (root_index D) roots) eqn:E; [|discriminate].
    inversion H; subst. simpl. split; auto. apply prepare_roots_spec. exact E.
  Qed.

  (** [load_set] fails exactly when a root names no definition. *)
  Theorem load_set_some : forall D roots,
    (exists ps, load_set D roots = Some ps) <->
    Forall (fun r => r < length D) roots.
  Proof.
    intros D roots. unfold load_set.
    assert (Hp : forall R, (exists prs, prepare_roots D R roots = Some prs) <->
                           Forall (fun r => r < length D) roots).
    { intros R. induction roots as [|r rs IH]; simpl.
      - split; [constructor | eauto].
      - unfold prepare_root. rewrite Forall_cons_iff, <- IH. split.
        + intros [prs H].
          destruct (nth_error D r) eqn:E; [|discriminate].
          destruct (prepare_roots D R rs); [|discriminate].
          split; [apply nth_error_Some; congruence | eauto].
        + intros [Hr [prs H]]. apply nth_error_Some in Hr.
          destruct (nth_error D r); [|congruence]. rewrite H. eauto. }
    rewrite <- (Hp (root_index D)). split.
    - intros [ps H]. destruct (prepare_roots D (root_index D) roots); [eauto|discriminate].
    - intros [prs H]. rewrite H. eauto.
  Qed.

  Theorem set_match_correct : forall D roots ps fuel i r t,
    load_set D roots = Some ps -> nth_error roots i = Some r ->
    set_match ps fuel i t = match_root G D fuel r t.
  Proof.
    intros D roots ps fuel i r t Hl Hr. apply load_set_roots in Hl.
    destruct Hl as [Hd Hf]. unfold set_match. rewrite Hd.
    revert i Hr. induction Hf as [|r' pr rs prs Hp Hf IH]; intros i Hr;
      [destruct i; discriminate|].
    destruct i as [|i]; simpl in *.
    - inversion Hr; subst. apply run_root_prepared. exact Hp.
    - apply IH. exact Hr.
  Qed.

  Lemma entries_from_spec : forall D fuel roots prs i t acc,
    Forall2 (fun r pr => prepare_root D (root_index D) r = Some pr) roots prs ->
    entries_from D fuel prs i t acc = at_node G D fuel roots i t ++ acc.
  Proof.
    intros D fuel roots prs i t acc H. revert i.
    induction H as [|r pr rs prs Hp Hf IH]; intros i; simpl; auto.
    rewrite (run_root_prepared D fuel r pr t Hp), IH.
    destruct (match_root G D fuel r t); reflexivity.
  Qed.

  Lemma nodes_from_spec : forall D fuel roots prs k acc,
    Forall2 (fun r pr => prepare_root D (root_index D) r = Some pr) roots prs ->
    nodes_from D fuel prs k acc = match_all G D fuel roots k ++ acc.
  Proof.
    intros D fuel roots prs k. induction k as [|k IH]; intros acc H; simpl; auto.
    rewrite IH, (entries_from_spec D fuel roots prs 0 k acc H) by exact H.
    rewrite match_all_S, app_assoc. reflexivity.
  Qed.

  Theorem set_match_all_correct : forall D roots ps fuel N,
    load_set D roots = Some ps ->
    set_match_all ps fuel N = match_all G D fuel roots N.
  Proof.
    intros D roots ps fuel N Hl. apply load_set_roots in Hl. destruct Hl as [Hd Hf].
    unfold set_match_all. rewrite Hd. rewrite (nodes_from_spec D fuel roots _ N [] Hf).
    apply app_nil_r.
  Qed.

  Definition apply_entry {A : Type} (f : A -> nat -> node -> answer -> A)
      (acc : A) (e : nat * node * answer) : A :=
    match e with (i, t, a) => f acc i t a end.

  Lemma fold_roots_spec : forall A (f : A -> nat -> node -> answer -> A) D fuel roots prs i t acc,
    Forall2 (fun r pr => prepare_root D (root_index D) r = Some pr) roots prs ->
    fold_roots f D fuel prs i t acc = fold_left (apply_entry f) (at_node G D fuel roots i t) acc.
  Proof.
    intros A f D fuel roots prs i t acc H. revert i acc.
    induction H as [|r pr rs prs Hp Hf IH]; intros i acc; simpl; auto.
    rewrite (run_root_prepared D fuel r pr t Hp), IH, fold_left_app.
    destruct (match_root G D fuel r t); reflexivity.
  Qed.

  Lemma fold_nodes_spec : forall A (f : A -> nat -> node -> answer -> A) D fuel roots prs k t acc,
    Forall2 (fun r pr => prepare_root D (root_index D) r = Some pr) roots prs ->
    fold_nodes f D fuel prs k t acc =
      fold_left (apply_entry f) (flat_map (fun t => at_node G D fuel roots 0 t) (seq t k)) acc.
  Proof.
    intros A f D fuel roots prs k. induction k as [|k IH]; intros t acc H; simpl; auto.
    rewrite IH by exact H. rewrite fold_left_app. f_equal.
    apply fold_roots_spec. exact H.
  Qed.

  (** The streaming form applies [f] to [match_all]'s entries, in order. *)
  Theorem set_match_all_fold_correct : forall A D roots ps fuel N
      (f : A -> nat -> node -> answer -> A) acc,
    load_set D roots = Some ps ->
    set_match_all_fold ps fuel N f acc =
      fold_left (apply_entry f) (match_all G D fuel roots N) acc.
  Proof.
    intros A D roots ps fuel N f acc Hl. apply load_set_roots in Hl. destruct Hl as [Hd Hf].
    unfold set_match_all_fold, match_all. rewrite Hd. apply fold_nodes_spec. exact Hf.
  Qed.

  Theorem set_candidates_correct : forall D roots ps f sa,
    load_set D roots = Some ps -> set_candidates ps f sa = candidates D roots f sa.
  Proof.
    intros D roots ps f sa Hl. apply load_set_roots in Hl. destruct Hl as [_ Hf].
    unfold set_candidates, candidates. generalize 0.
    induction Hf as [|r pr rs prs Hp Hf IH]; intros i; simpl; auto.
    unfold prepare_root in Hp. destruct (nth_error D r); [|discriminate].
    inversion Hp; subst. simpl. rewrite !IH. reflexivity.
  Qed.
  (** [pypm_candidates_at]: [T] is the children's index of each root
      ([kid_table], computed once when the set is loaded). *)
  Fixpoint pkcands_from (sa : attribute -> option Z) (f : symbol)
      (ks : list (symbol * (attribute -> option Z))) (prs : list proot) (T : list kset)
      (i : nat) : list nat :=
    match prs with
    | [] => []
    | pr :: prs' =>
        let k := match T with k :: _ => k | [] => [(RAny, [])] end in
        if rs_mem sa f (pr_syms pr) && k_mem k f sa ks
        then i :: pkcands_from sa f ks prs' (tl T) (S i)
        else pkcands_from sa f ks prs' (tl T) (S i)
    end.

  Definition set_candidates_at (ps : pset) (T : list kset) (f : symbol)
      (sa : attribute -> option Z) (ks : list (symbol * (attribute -> option Z))) : list nat :=
    pkcands_from sa f ks (ps_roots ps) T 0.

  Theorem set_candidates_at_correct : forall D roots ps f sa ks,
    load_set D roots = Some ps ->
    set_candidates_at ps (kid_table D roots) f sa ks = candidates_at D roots f sa ks.
  Proof.
    intros D roots ps f sa ks Hl. apply load_set_roots in Hl. destruct Hl as [_ Hf].
    unfold set_candidates_at, candidates_at, kid_table. generalize 0.
    induction Hf as [|r pr rs prs Hp Hf IH]; intros i; simpl; auto.
    unfold prepare_root in Hp. destruct (nth_error D r); [|discriminate].
    inversion Hp; subst. simpl. rewrite !IH. reflexivity.
  Qed.
End Prepared.
