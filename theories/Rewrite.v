(** * Rewrite: the firing of a rewrite on a term graph, and its validator

    The matcher ([Entry.v], [Multi.v]) says where a rule matches; the step
    that then changes the user's model is a graph rewrite: each matched root
    is replaced by a replacement node, its uses are redirected, and dead
    nodes are dropped. This file models that step and proves it correct
    over an abstract semantics, and gives the checker [validate] the
    library runs on every pass of a driver (the driver's before and after
    graphs, its firings and the renaming between them).

    A term graph [tgraph] is a list of nodes (a label and the indices of its
    arguments) in topological order and a list of output indices. Its
    denotation is computed left to right under an abstract interpretation
    [interp : nat -> list V -> V] of the labels (nullary labels model the
    inputs, parameters and constants; the driver interns one label per
    operator and non-node arguments).

    [replace g fs] fires [fs], a list of (root, replacement) pairs (one pair
    for a single-root rule, several for a multi-root one): the replacement
    nodes are already in [g], each placed before its root (as a driver
    inserts them before the root), so redirecting the root's uses keeps the
    topological order; then the nodes no output reaches are dropped and the
    rest renumbered in order.

    [validate before after fs map fi mi us] decides whether [after] is [before] with
    [fs] fired, up to the renaming [map] (after node -> before node, [None]
    for a new node); the conditions and reason codes are those of the C
    entry point [pypm_validate_rewrite] (docs/internals/format.md). It reads
    the node tables through index tables built once and its hints [fi],
    [mi], [us] (tables the caller computes and it checks), O(n) table reads
    and a lookup of the fired roots' map (log of the firings) per argument.
    [validate_sound]: an accepted pass preserves the outputs' denotation
    when each replacement denotes what its root did; [validate_renaming]:
    what acceptance says about the two graphs, as a renaming relation;
    [validate_replace]: the equation form, [after] is [replace] of [before]
    with the new nodes inserted, up to a bijective renaming ([tiso]). *)

From Coq Require Import List Bool Arith Lia.
From PyPM Require Import Subst.
Import ListNotations.

Record tnode := mkTNode { tlabel : nat; targs : list nat }.
Record tgraph := mkTGraph { tnodes : list tnode; touts : list nat }.

Definition tnode0 : tnode := mkTNode 0 [].
Definition tnode_at (g : tgraph) (i : nat) : tnode := nth i (tnodes g) tnode0.

(** Well formed: every argument of node [i] is a node before [i] (so the
    graph is acyclic), and every output is a node. *)
Definition wf_tgraph (g : tgraph) : Prop :=
  (forall i a, i < length (tnodes g) -> In a (targs (tnode_at g i)) -> a < i) /\
  (forall o, In o (touts g) -> o < length (tnodes g)).

(** ** Denotation *)
Section Denote.
  Variable V : Type.
  Variable interp : nat -> list V -> V.
  Variable dflt : V.

  (** The values of the nodes, left to right: node [i] is its label applied
      to the values of its arguments, computed before it. *)
  Fixpoint dvals_from (env : list V) (ns : list tnode) : list V :=
    match ns with
    | [] => env
    | n :: ns' =>
        dvals_from (env ++ [interp (tlabel n) (map (fun a => nth a env dflt) (targs n))]) ns'
    end.

  Definition dnode (g : tgraph) (i : nat) : V := nth i (dvals_from [] (tnodes g)) dflt.
  Definition denote (g : tgraph) : list V := map (dnode g) (touts g).

  Lemma skipn_nth_cons : forall A (l : list A) i d, i < length l ->
    skipn i l = nth i l d :: skipn (S i) l.
  Proof.
    intros A l. induction l as [|x l IH]; intros [|i] d Hi; simpl in *; try lia; auto.
    apply IH. lia.
  Qed.

  Lemma dvals_from_app : forall ns1 ns2 env,
    dvals_from env (ns1 ++ ns2) = dvals_from (dvals_from env ns1) ns2.
  Proof. induction ns1; intros; simpl; auto. Qed.

  Lemma dvals_from_prefix : forall ns env, exists s, dvals_from env ns = env ++ s.
  Proof.
    induction ns; intros; simpl.
    - exists []. now rewrite app_nil_r.
    - destruct (IHns (env ++ [interp (tlabel a) (map (fun a0 => nth a0 env dflt) (targs a))]))
        as [s Hs].
      rewrite Hs, <- app_assoc. eauto.
  Qed.

  Lemma dvals_from_length : forall ns env,
    length (dvals_from env ns) = length env + length ns.
  Proof.
    induction ns; intros; simpl; [lia|]. rewrite IHns, app_length. simpl. lia.
  Qed.

  (** The defining equation of a node's value, in a well-formed graph. *)
  Lemma dnode_eq : forall g i,
    (forall a, In a (targs (tnode_at g i)) -> a < i) -> i < length (tnodes g) ->
    dnode g i = interp (tlabel (tnode_at g i)) (map (dnode g) (targs (tnode_at g i))).
  Proof.
    intros g i Ha Hi. unfold dnode, tnode_at.
    set (ns := tnodes g) in *.
    assert (Hs : ns = firstn i ns ++ nth i ns tnode0 :: skipn (S i) ns).
    { rewrite <- (firstn_skipn i ns) at 1. f_equal.
      apply skipn_nth_cons. exact Hi. }
    assert (Hlen : length (firstn i ns) = i) by (rewrite firstn_length; lia).
    set (pre := dvals_from [] (firstn i ns)).
    assert (Hpl : length pre = i) by (unfold pre; rewrite dvals_from_length; simpl; lia).
    set (v := interp (tlabel (nth i ns tnode0)) (map (fun a => nth a pre dflt) (targs (nth i ns tnode0)))).
    assert (Hall : dvals_from [] ns = dvals_from (pre ++ [v]) (skipn (S i) ns)).
    { rewrite Hs at 1. rewrite dvals_from_app. reflexivity. }
    destruct (dvals_from_prefix (skipn (S i) ns) (pre ++ [v])) as [s Hsuf].
    rewrite Hall, Hsuf, <- app_assoc.
    rewrite app_nth2 by lia. rewrite Hpl, Nat.sub_diag. simpl.
    unfold v. f_equal. apply map_ext_in. intros a Hin.
    specialize (Ha a Hin). rewrite app_nth1 by lia. reflexivity.
  Qed.
End Denote.

(** ** The firing *)

(** The replacement of [a] if it is a fired root (the first pair names it),
    else [a] itself. *)
Definition rep_of (fs : list (nat * nat)) (a : nat) : nat :=
  match find (fun p => Nat.eqb (fst p) a) fs with Some (_, r) => r | None => a end.

Lemma rep_of_cases : forall fs a, rep_of fs a = a \/ In (a, rep_of fs a) fs.
Proof.
  intros fs a. unfold rep_of.
  destruct (find (fun p => Nat.eqb (fst p) a) fs) as [[r q]|] eqn:E; [|auto].
  right. destruct (find_some _ _ E) as [Hin Heq]. simpl in Heq.
  apply Nat.eqb_eq in Heq. subst. exact Hin.
Qed.

(** Redirect every use (argument or output) of a fired root to its replacement. *)
Definition redirect (fs : list (nat * nat)) (g : tgraph) : tgraph :=
  mkTGraph (map (fun n => mkTNode (tlabel n) (map (rep_of fs) (targs n))) (tnodes g))
           (map (rep_of fs) (touts g)).

(** The live nodes: marked from the outputs by one sweep from the last node
    down (the arguments of a node come before it). *)
Fixpoint sweep (ns : list tnode) (k : nat) (m : nat -> bool) : nat -> bool :=
  match k with
  | 0 => m
  | S k' =>
      let m' := if m k' then (fun i => m i || existsb (Nat.eqb i) (targs (nth k' ns tnode0))) else m in
      sweep ns k' m'
  end.

Definition live (g : tgraph) : nat -> bool :=
  sweep (tnodes g) (length (tnodes g)) (fun i => existsb (Nat.eqb i) (touts g)).

(** The new index of a kept node: the number of live nodes before it. *)
Definition renum (L : nat -> bool) (k : nat) : nat := length (filter L (seq 0 k)).

(** Drop the dead nodes and renumber the rest in order. *)
Definition prune (g : tgraph) : tgraph :=
  let L := live g in
  mkTGraph (map (fun k => mkTNode (tlabel (tnode_at g k)) (map (renum L) (targs (tnode_at g k))))
                (filter L (seq 0 (length (tnodes g)))))
           (map (renum L) (touts g)).

(** The firing. *)
Definition replace (g : tgraph) (fs : list (nat * nat)) : tgraph := prune (redirect fs g).

(** The node of [redirect fs g] that node [p] of [replace g fs] keeps. *)
Definition origin (g : tgraph) (fs : list (nat * nat)) (p : nat) : nat :=
  let g' := redirect fs g in nth p (filter (live g') (seq 0 (length (tnodes g')))) 0.

(** The firings a driver may apply: each root a node, each replacement placed
    before its root. *)
Definition firings_ok (g : tgraph) (fs : list (nat * nat)) : Prop :=
  forall r p, In (r, p) fs -> p < r /\ r < length (tnodes g).

(** *** Proofs about the firing *)

Lemma rep_of_le : forall g fs a, firings_ok g fs -> rep_of fs a <= a.
Proof.
  intros g fs a Hf. destruct (rep_of_cases fs a) as [E|E]; [lia|].
  destruct (Hf _ _ E). lia.
Qed.

Lemma redirect_length : forall fs g, length (tnodes (redirect fs g)) = length (tnodes g).
Proof. intros. simpl. apply map_length. Qed.

Lemma redirect_at : forall fs g i, i < length (tnodes g) ->
  tnode_at (redirect fs g) i = mkTNode (tlabel (tnode_at g i)) (map (rep_of fs) (targs (tnode_at g i))).
Proof.
  intros fs g i Hi. unfold tnode_at. simpl.
  rewrite nth_indep with (d' := mkTNode (tlabel tnode0) (map (rep_of fs) (targs tnode0)))
    by (rewrite map_length; exact Hi).
  exact (map_nth (fun n => mkTNode (tlabel n) (map (rep_of fs) (targs n))) (tnodes g) tnode0 i).
Qed.

Lemma redirect_wf : forall g fs, wf_tgraph g -> firings_ok g fs -> wf_tgraph (redirect fs g).
Proof.
  intros g fs [Hn Ho] Hf. split.
  - intros i a Hi Ha. rewrite redirect_length in Hi. rewrite redirect_at in Ha by exact Hi.
    simpl in Ha. apply in_map_iff in Ha as [b [<- Hb]].
    pose proof (rep_of_le g fs b Hf). specialize (Hn i b Hi Hb). lia.
  - intros o Ho'. rewrite redirect_length. simpl in Ho'.
    apply in_map_iff in Ho' as [b [<- Hb]]. pose proof (rep_of_le g fs b Hf).
    specialize (Ho b Hb). lia.
Qed.

Lemma sweep_mono : forall ns k m i, m i = true -> sweep ns k m i = true.
Proof.
  induction k; intros m i H; simpl; auto. apply IHk.
  destruct (m k); auto. now rewrite H.
Qed.

Lemma existsb_eqb_false : forall i l, (forall a, In a l -> a < i) -> existsb (Nat.eqb i) l = false.
Proof.
  intros i l H. apply not_true_is_false. intro E. apply existsb_exists in E as [a [Ha E]].
  apply Nat.eqb_eq in E. subst. specialize (H a Ha). lia.
Qed.

Lemma sweep_closed : forall g k m,
  (forall i a, i < length (tnodes g) -> In a (targs (tnode_at g i)) -> a < i) ->
  (forall j a, k <= j -> j < length (tnodes g) -> m j = true -> In a (targs (tnode_at g j)) -> m a = true) ->
  forall j a, j < length (tnodes g) -> sweep (tnodes g) k m j = true ->
  In a (targs (tnode_at g j)) -> sweep (tnodes g) k m a = true.
Proof.
  intros g k. induction k; intros m Hwf Hinv j a Hj Hm Ha.
  - simpl in *. apply (Hinv j a); auto. lia.
  - simpl in *. apply (IHk _ Hwf) with (j := j); auto.
    clear j a Hj Hm Ha. intros j a Hkj Hj Hm Ha.
    destruct (m k) eqn:Mk.
    + destruct (Nat.eq_dec j k) as [->|Hne].
      * apply orb_true_intro. right. apply existsb_exists. exists a. split; [exact Ha|].
        apply Nat.eqb_refl.
      * assert (Hjk : k < j) by lia.
        rewrite (existsb_eqb_false j) in Hm.
        2:{ intros b Hb. unfold tnode_at in Hwf. specialize (Hwf k b ltac:(lia) Hb). lia. }
        rewrite orb_false_r in Hm. rewrite (Hinv j a ltac:(lia) Hj Hm Ha). reflexivity.
    + destruct (Nat.eq_dec j k) as [->|Hne]; [congruence|].
      apply (Hinv j a); auto. lia.
Qed.

Lemma live_closed : forall g, wf_tgraph g ->
  forall j a, j < length (tnodes g) -> live g j = true -> In a (targs (tnode_at g j)) -> live g a = true.
Proof.
  intros g [Hn _] j a Hj Hl Ha. unfold live in *.
  apply (sweep_closed g _ _ Hn) with (j := j); auto. intros. lia.
Qed.

Lemma live_out : forall g o, In o (touts g) -> live g o = true.
Proof.
  intros g o Ho. unfold live. apply sweep_mono. apply existsb_exists. exists o.
  split; [exact Ho | apply Nat.eqb_refl].
Qed.

Lemma filter_seq_nth : forall L n p, p < length (filter L (seq 0 n)) ->
  let k := nth p (filter L (seq 0 n)) 0 in k < n /\ L k = true /\ renum L k = p.
Proof.
  intros L n. induction n; intros p Hp; cbv zeta in *; [simpl in Hp; lia|].
  rewrite seq_S, filter_app in *. rewrite app_length in Hp.
  destruct (Nat.lt_ge_cases p (length (filter L (seq 0 n)))) as [Hlt|Hge].
  - rewrite app_nth1 by exact Hlt. destruct (IHn p Hlt) as (H1 & H2 & H3). auto.
  - simpl filter in *. destruct (L n) eqn:Ln; simpl length in Hp; [|lia].
    assert (p = length (filter L (seq 0 n))) by lia. subst p.
    rewrite app_nth2 by lia. rewrite Nat.sub_diag. simpl nth. auto.
Qed.

Lemma renum_nth : forall L n k, k < n -> L k = true ->
  nth (renum L k) (filter L (seq 0 n)) 0 = k /\ renum L k < length (filter L (seq 0 n)).
Proof.
  intros L n k Hk Lk. unfold renum.
  replace n with (k + S (n - S k)) by lia.
  rewrite seq_app, filter_app. simpl. rewrite Lk. simpl.
  rewrite app_nth2 by lia. rewrite Nat.sub_diag. simpl.
  rewrite app_length. simpl. split; [reflexivity | lia].
Qed.

Lemma renum_lt : forall L a k, a < k -> L a = true -> renum L a < renum L k.
Proof.
  intros L a k Hak La. unfold renum.
  replace k with (a + S (k - S a)) by lia.
  rewrite seq_app, filter_app, app_length. simpl. rewrite La. simpl. lia.
Qed.

Lemma prune_length : forall g, length (tnodes (prune g)) = length (filter (live g) (seq 0 (length (tnodes g)))).
Proof. intros. simpl. apply map_length. Qed.

Lemma prune_at : forall g p, p < length (tnodes (prune g)) ->
  let k := nth p (filter (live g) (seq 0 (length (tnodes g)))) 0 in
  tnode_at (prune g) p = mkTNode (tlabel (tnode_at g k)) (map (renum (live g)) (targs (tnode_at g k))).
Proof.
  intros g p Hp k. unfold tnode_at at 1. simpl. rewrite prune_length in Hp.
  rewrite nth_indep with (d' := mkTNode (tlabel (tnode_at g 0)) (map (renum (live g)) (targs (tnode_at g 0))))
    by (rewrite map_length; exact Hp).
  exact (map_nth (fun k => mkTNode (tlabel (tnode_at g k)) (map (renum (live g)) (targs (tnode_at g k))))
           (filter (live g) (seq 0 (length (tnodes g)))) 0 p).
Qed.

Lemma prune_wf : forall g, wf_tgraph g -> wf_tgraph (prune g).
Proof.
  intros g Hw. pose proof Hw as [Hn Ho]. split.
  - intros p a' Hp Ha'. rewrite prune_at in Ha' by exact Hp. simpl in Ha'.
    rewrite prune_length in Hp. destruct (filter_seq_nth (live g) _ p Hp) as (Hk & Lk & Rk).
    set (k := nth p (filter (live g) (seq 0 (length (tnodes g)))) 0) in *.
    apply in_map_iff in Ha' as [a [<- Ha]].
    rewrite <- Rk. apply renum_lt; [exact (Hn k a Hk Ha)|].
    exact (live_closed g Hw k a Hk Lk Ha).
  - intros o' Ho'. simpl in Ho'. apply in_map_iff in Ho' as [o [<- Hoo]].
    rewrite prune_length. pose proof (Ho o Hoo).
    exact (proj2 (renum_nth (live g) (length (tnodes g)) o ltac:(lia) (live_out g o Hoo))).
Qed.

Theorem replace_wf : forall g fs, wf_tgraph g -> firings_ok g fs ->
  wf_tgraph (replace g fs) /\
  map (origin g fs) (touts (replace g fs)) = map (rep_of fs) (touts g) /\
  (forall o, In o (touts g) -> rep_of fs o = o \/ In (o, rep_of fs o) fs).
Proof.
  intros g fs Hw Hf. pose proof (redirect_wf g fs Hw Hf) as Hw'. split; [exact (prune_wf _ Hw')|].
  split; [|intros; apply rep_of_cases].
  set (g' := redirect fs g).
  assert (Hto : touts g' = map (rep_of fs) (touts g)) by reflexivity.
  unfold replace, origin, prune. fold g'. cbn [touts]. rewrite Hto, !map_map.
  apply map_ext_in. intros o Ho.
  assert (Ho' : In (rep_of fs o) (touts g')) by (rewrite Hto; apply in_map; exact Ho).
  destruct Hw' as [_ Hout].
  exact (proj1 (renum_nth (live g') _ _ (Hout _ Ho') (live_out g' _ Ho'))).
Qed.

Section DenoteFiring.
  Variable V : Type.
  Variable interp : nat -> list V -> V.
  Variable dflt : V.
  Notation dn := (dnode V interp dflt).

  Lemma redirect_dnode : forall g fs, wf_tgraph g -> firings_ok g fs ->
    (forall r p, In (r, p) fs -> dn g p = dn g r) ->
    forall i, i < length (tnodes g) -> dn (redirect fs g) i = dn g i.
  Proof.
    intros g fs Hw Hf Hrep. pose proof (redirect_wf g fs Hw Hf) as Hw'.
    intro i. induction i as [i IH] using lt_wf_ind. intro Hi.
    destruct Hw as [Hn Ho]. destruct Hw' as [Hn' _].
    assert (Hi' : i < length (tnodes (redirect fs g))) by (rewrite redirect_length; exact Hi).
    rewrite (dnode_eq V interp dflt (redirect fs g) i (fun a => Hn' i a Hi') Hi').
    rewrite (dnode_eq V interp dflt g i (fun a => Hn i a Hi) Hi).
    rewrite redirect_at by exact Hi. simpl. rewrite map_map. f_equal.
    apply map_ext_in. intros a Ha. pose proof (Hn i a Hi Ha).
    pose proof (rep_of_le g fs a Hf).
    rewrite IH by lia. destruct (rep_of_cases fs a) as [E|E].
    - now rewrite E.
    - apply Hrep. exact E.
  Qed.

  Lemma prune_dnode : forall g, wf_tgraph g ->
    forall k, k < length (tnodes g) -> live g k = true ->
    dn (prune g) (renum (live g) k) = dn g k.
  Proof.
    intros g Hw. pose proof (prune_wf g Hw) as [Hn' _]. pose proof Hw as [Hn _].
    intro k. induction k as [k IH] using lt_wf_ind. intros Hk Lk.
    destruct (renum_nth (live g) _ k Hk Lk) as [Hnth Hlt].
    rewrite <- prune_length in Hlt.
    rewrite (dnode_eq V interp dflt (prune g) _ (fun a => Hn' _ a Hlt) Hlt).
    rewrite (dnode_eq V interp dflt g k (fun a => Hn k a Hk) Hk).
    rewrite prune_at by exact Hlt. simpl. rewrite Hnth. rewrite map_map. f_equal.
    apply map_ext_in. intros a Ha. apply IH; [exact (Hn k a Hk Ha) | pose proof (Hn k a Hk Ha); lia |].
    exact (live_closed g Hw k a Hk Lk Ha).
  Qed.

  Theorem replace_denote : forall g fs, wf_tgraph g -> firings_ok g fs ->
    (forall r p, In (r, p) fs -> dn g p = dn g r) ->
    denote V interp dflt (replace g fs) = denote V interp dflt g.
  Proof.
    intros g fs Hw Hf Hrep. pose proof (redirect_wf g fs Hw Hf) as Hw'.
    set (g' := redirect fs g).
    assert (Hto : touts g' = map (rep_of fs) (touts g)) by reflexivity.
    assert (Htp : touts (prune g') = map (renum (live g')) (touts g')) by reflexivity.
    unfold denote, replace. fold g'. rewrite Htp, Hto, !map_map.
    apply map_ext_in. intros o Ho.
    assert (Ho' : In (rep_of fs o) (touts g')) by (rewrite Hto; apply in_map; exact Ho).
    pose proof Hw' as [_ Hout]. pose proof (Hout _ Ho') as Hlt.
    rewrite (prune_dnode g' Hw' _ Hlt (live_out g' _ Ho')).
    rewrite redirect_length in Hlt.
    unfold g'. rewrite (redirect_dnode g fs Hw Hf Hrep _ Hlt).
    destruct (rep_of_cases fs o) as [E|E]; [now rewrite E | exact (Hrep _ _ E)].
  Qed.
End DenoteFiring.

(** ** The validator *)

(** The reason codes of [pypm_validate_rewrite]. *)
Definition R_BEFORE := 1.
Definition R_AFTER := 2.
Definition R_FIRING := 3.
Definition R_MAP := 4.
Definition R_NODE := 5.
Definition R_ARG := 6.
Definition R_OUTPUT := 7.
Definition R_DEAD := 8.

(** A rejection: a reason code and the index it concerns ([None]: the
    output counts differ, -1 in the C API). *)
Definition reject := (nat * option nat)%type.

(** *** Index tables

    Read-only tables [i -> x_i] of a list (the map, the before and after
    nodes, the images, the operators: consecutive indices from 0), built
    once and read by position: [rtab], [table], [rfind]. In Coq a list
    read with [nth_error] ([table_find]); extracted to an OCaml array
    ([Array.of_list], a read bounds-checked against its length:
    extraction/Extraction.v), so a read is one load. A record, so that no
    list is taken for a table without [table].

    No check builds a set: where one would be needed (distinct roots, an
    injective map, reachability), the check reads a hint, a table the
    caller computes ([pypm_validate_rewrite]: the OCaml glue) and the check
    verifies entry by entry; the hint is trusted for nothing (a wrong one
    rejects, the theorems hold for any). *)
Record rtab (A : Type) : Type := RTab { rt_list : list A }.
Arguments RTab {A} _.
Arguments rt_list {A} _.

Definition table {A} (l : list A) : rtab A := RTab l.
Definition rfind {A} (t : rtab A) (i : nat) : option A := nth_error (rt_list t) i.

Lemma table_find : forall A (l : list A) j, rfind (table l) j = nth_error l j.
Proof. reflexivity. Qed.

(** The first node [i + k] with an argument not before it. *)
Fixpoint bad_node (i : nat) (ns : list tnode) : option nat :=
  match ns with
  | [] => None
  | n :: ns' => if forallb (fun a => Nat.ltb a i) (targs n) then bad_node (S i) ns' else Some i
  end.

(** The first output position [j + k] out of range. *)
Fixpoint bad_out (n j : nat) (os : list nat) : option nat :=
  match os with
  | [] => None
  | o :: os' => if Nat.ltb o n then bad_out n (S j) os' else Some j
  end.

Definition check_wf (code : nat) (g : tgraph) : option reject :=
  match bad_node 0 (tnodes g) with
  | Some i => Some (code, Some i)
  | None =>
      match bad_out (length (tnodes g)) 0 (touts g) with
      | Some j => Some (code, Some (length (tnodes g) + j))
      | None => None
      end
  end.

(** A hint [T] names [h] at [g]: [T g = h + 1] ([0]: none). *)
Definition hint_ok (T : rtab nat) (g h : nat) : bool :=
  match rfind T g with Some k => Nat.eqb k (S h) | None => false end.

(** Firings: roots in range and distinct, replacements in range. Distinct
    by a hint: [FI] names, for each before node, the firing at it. *)
Fixpoint bad_firing (nb na : nat) (FI : rtab nat) (f : nat) (fs : list (nat * nat)) : option nat :=
  match fs with
  | [] => None
  | (r, p) :: fs' =>
      if Nat.ltb r nb && Nat.ltb p na && hint_ok FI r f
      then bad_firing nb na FI (S f) fs' else Some f
  end.

(** The map: entries in range, injective, never a fired root. Injective
    by a hint: [MI] names, for each before node, the after node [h] mapped
    to it as [h + 1] ([0]: none); two after nodes mapped to one before node
    cannot both be named. The hint is the caller's (the C API computes it)
    and trusted for nothing: a wrong one rejects. *)
Fixpoint bad_map (nb : nat) (F : VarMap.t nat) (MI : rtab nat) (h : nat)
    (mp : list (option nat)) : option nat :=
  match mp with
  | [] => None
  | None :: mp' => bad_map nb F MI (S h) mp'
  | Some g :: mp' =>
      if Nat.ltb g nb && hint_ok MI g h && negb (VarMap.mem g F)
      then bad_map nb F MI (S h) mp' else Some h
  end.

(** An after argument (or output) [ah] stands for the before one [ag]: the
    replacement if [ag] was fired, else its image under the map. *)
Definition arg_ok (F : VarMap.t nat) (MT : rtab (option nat)) (ah ag : nat) : bool :=
  match VarMap.find ag F with
  | Some p => Nat.eqb ah p
  | None => match rfind MT ah with Some (Some g) => Nat.eqb g ag | _ => false end
  end.

(** The first position [j + k] where the lists differ under [arg_ok]. *)
Fixpoint bad_pair F MT (j : nat) (ahs ags : list nat) : option nat :=
  match ahs, ags with
  | [], [] => None
  | ah :: ahs', ag :: ags' => if arg_ok F MT ah ag then bad_pair F MT (S j) ahs' ags' else Some j
  | _, _ => Some j
  end.

(** Each mapped after node against its before node. *)
Fixpoint bad_mapped (BT : rtab tnode) F MT (h : nat) (ns : list tnode) (mp : list (option nat))
    : option reject :=
  match ns, mp with
  | n :: ns', Some g :: mp' =>
      match rfind BT g with
      | None => Some (R_MAP, Some h)
      | Some m =>
          if Nat.eqb (tlabel n) (tlabel m) && Nat.eqb (length (targs n)) (length (targs m)) then
            match bad_pair F MT 0 (targs n) (targs m) with
            | Some _ => Some (R_ARG, Some h)
            | None => bad_mapped BT F MT (S h) ns' mp'
            end
          else Some (R_NODE, Some h)
      end
  | _ :: ns', None :: mp' => bad_mapped BT F MT (S h) ns' mp'
  | _, _ => None
  end.

(** Every after node is reached from the outputs, by a hint: [US] names,
    for node [h], a later node that reads it, or its position [j] among the
    outputs as [na + j]. Reachability follows by
    induction from the last node down; a wrong hint rejects. *)
Definition live_ok (na : nat) (AT : rtab tnode) (OT : rtab nat) (US : rtab nat) (h : nat) : bool :=
  match rfind US h with
  | Some u =>
      if Nat.ltb u na then
        Nat.ltb h u &&
        match rfind AT u with Some n => existsb (Nat.eqb h) (targs n) | None => false end
      else match rfind OT (u - na) with Some o => Nat.eqb o h | None => false end
  | None => false
  end.

(** The first node [h + j] (of [k]) not shown reached. *)
Fixpoint first_dead (na : nat) (AT : rtab tnode) (OT : rtab nat) (US : rtab nat) (h k : nat)
    : option nat :=
  match k with
  | 0 => None
  | S k' => if live_ok na AT OT US h then first_dead na AT OT US (S h) k' else Some h
  end.

(** The fired roots: [root -> replacement]. *)
Definition fire_table (fs : list (nat * nat)) : VarMap.t nat :=
  fold_left (fun m rp => VarMap.add (fst rp) (snd rp) m) fs (VarMap.empty nat).

(** The validator, given its tables: [F] the fired roots ([fire_table fs]),
    [MT] the map, [BT] and [AT] the before and after nodes, by index
    ([table]), and the hints [FI], [MI], [US]; [validate] builds the
    tables, [Certify.validate_firings] builds them once for itself and
    this. *)
Definition validate_with (F : VarMap.t nat) (MT : rtab (option nat)) (BT AT : rtab tnode)
    (FI MI US : rtab nat)
    (before after : tgraph) (fs : list (nat * nat)) (mp : list (option nat))
    : option reject :=
  let nb := length (tnodes before) in
  let na := length (tnodes after) in
  match check_wf R_BEFORE before with Some e => Some e | None =>
  match check_wf R_AFTER after with Some e => Some e | None =>
  match bad_firing nb na FI 0 fs with Some f => Some (R_FIRING, Some f) | None =>
  if negb (Nat.eqb (length mp) na) then Some (R_MAP, Some (Nat.min (length mp) na)) else
  match bad_map nb F MI 0 mp with Some h => Some (R_MAP, Some h) | None =>
  match bad_mapped BT F MT 0 (tnodes after) mp with Some e => Some e | None =>
  if negb (Nat.eqb (length (touts after)) (length (touts before))) then Some (R_OUTPUT, None) else
  match bad_pair F MT 0 (touts after) (touts before) with Some j => Some (R_OUTPUT, Some j) | None =>
  match first_dead na AT (table (touts after)) US 0 na with
  | Some h => Some (R_DEAD, Some h) | None => None end
  end end end end end end.

(** The validator: [None] accepts, [Some (code, where)] rejects. [FI],
    [MI] and [US] are hints (the firing at each before node, the inverse of
    the map, a reader or output position of each after node: [bad_firing],
    [bad_map], [live_ok]): any hints may be given, acceptance means the
    same ([validate_renaming]); the C API computes them. *)
Definition validate (before after : tgraph) (fs : list (nat * nat)) (mp : list (option nat))
    (FI MI US : rtab nat) : option reject :=
  validate_with (fire_table fs) (table mp) (table (tnodes before)) (table (tnodes after))
    FI MI US before after fs mp.

(** *** Soundness of the validator *)

Lemma fire_table_in : forall fs r p, VarMap.find r (fire_table fs) = Some p -> In (r, p) fs.
Proof.
  unfold fire_table. intros fs.
  assert (G : forall m r p, VarMap.find r (fold_left (fun m rp => VarMap.add (fst rp) (snd rp) m) fs m) = Some p ->
                            In (r, p) fs \/ VarMap.find r m = Some p).
  { induction fs as [|[a b] fs IH]; intros m r p H; simpl in *; auto.
    destruct (IH _ _ _ H) as [H'|H']; auto.
    destruct (Nat.eq_dec a r) as [->|Hne].
    - rewrite VarMapF.add_eq_o in H' by reflexivity. inversion H'. subst. auto.
    - rewrite VarMapF.add_neq_o in H' by exact Hne. auto. }
  intros r p H. destruct (G _ _ _ H) as [H'|H']; auto. rewrite VarMapF.empty_o in H'. discriminate.
Qed.

Lemma bad_node_spec : forall ns i, bad_node i ns = None ->
  forall k a, k < length ns -> In a (targs (nth k ns tnode0)) -> a < i + k.
Proof.
  induction ns as [|n ns IH]; intros i H k a Hk Ha; simpl in *; [lia|].
  destruct (forallb (fun a => Nat.ltb a i) (targs n)) eqn:E; [|discriminate].
  destruct k as [|k].
  - rewrite forallb_forall in E. specialize (E a Ha). apply Nat.ltb_lt in E. lia.
  - specialize (IH (S i) H k a ltac:(lia) Ha). lia.
Qed.

Lemma bad_out_spec : forall n os j, bad_out n j os = None -> forall o, In o os -> o < n.
Proof.
  induction os as [|o os IH]; intros j H x Hx; simpl in *; [contradiction|].
  destruct (Nat.ltb o n) eqn:E; [|discriminate]. apply Nat.ltb_lt in E.
  destruct Hx as [<-|Hx]; eauto.
Qed.

Lemma check_wf_spec : forall c g, check_wf c g = None -> wf_tgraph g.
Proof.
  intros c g H. unfold check_wf in H.
  destruct (bad_node 0 (tnodes g)) eqn:E1; [discriminate|].
  destruct (bad_out (length (tnodes g)) 0 (touts g)) eqn:E2; [discriminate|].
  split.
  - intros i a Hi Ha. exact (bad_node_spec _ 0 E1 i a Hi Ha).
  - exact (bad_out_spec _ _ _ E2).
Qed.

Lemma bad_pair_map : forall A F MT (f g : nat -> A) ahs ags j,
  bad_pair F MT j ahs ags = None ->
  (forall ah ag, In ah ahs -> arg_ok F MT ah ag = true -> f ah = g ag) ->
  map f ahs = map g ags.
Proof.
  intros A F MT f g. induction ahs as [|ah ahs IH]; intros [|ag ags] j H Hp; simpl in *;
    try discriminate; auto.
  destruct (arg_ok F MT ah ag) eqn:E; [|discriminate].
  f_equal; eauto.
Qed.

Lemma bad_mapped_spec : forall BT F MT ns mp h, bad_mapped BT F MT h ns mp = None ->
  forall k g, k < length ns -> nth_error mp k = Some (Some g) ->
  exists m, rfind BT g = Some m /\ tlabel (nth k ns tnode0) = tlabel m /\
            bad_pair F MT 0 (targs (nth k ns tnode0)) (targs m) = None.
Proof.
  intros BT F MT. induction ns as [|n ns IH]; intros mp h H k g Hk Hm; simpl in *; [lia|].
  destruct mp as [|[g'|] mp]; [destruct k; discriminate|..].
  - destruct (rfind BT g') as [m|] eqn:Eb; [|discriminate].
    destruct (Nat.eqb (tlabel n) (tlabel m) && Nat.eqb (length (targs n)) (length (targs m))) eqn:El;
      [|discriminate].
    destruct (bad_pair F MT 0 (targs n) (targs m)) eqn:Ep; [discriminate|].
    destruct k as [|k].
    + simpl in Hm. inversion Hm; subst. exists m. apply andb_true_iff in El as [El _].
      apply Nat.eqb_eq in El. auto.
    + apply (IH mp (S h) H k g ltac:(lia) Hm).
  - destruct k as [|k]; [discriminate|]. apply (IH mp (S h) H k g ltac:(lia) Hm).
Qed.

(** The conditions [validate] checks, one by one: acceptance unfolded. *)
Lemma validate_ok : forall before after fs mp fi mi us,
  validate before after fs mp fi mi us = None <->
  let nb := length (tnodes before) in
  let na := length (tnodes after) in
  let F := fire_table fs in
  let MT := table mp in
  let BT := table (tnodes before) in
  check_wf R_BEFORE before = None /\ check_wf R_AFTER after = None /\
  bad_firing nb na fi 0 fs = None /\ length mp = na /\
  bad_map nb F mi 0 mp = None /\
  bad_mapped BT F MT 0 (tnodes after) mp = None /\
  length (touts after) = length (touts before) /\
  bad_pair F MT 0 (touts after) (touts before) = None /\
  first_dead na (table (tnodes after)) (table (touts after)) us 0 na = None.
Proof.
  intros B A fs mp fi mi us. unfold validate, validate_with. cbv zeta. split.
  - intro Hv.
    destruct (check_wf R_BEFORE B) eqn:E1; [discriminate|].
    destruct (check_wf R_AFTER A) eqn:E2; [discriminate|].
    destruct (bad_firing _ _ _ 0 fs) eqn:E3; [discriminate|].
    destruct (negb (Nat.eqb (length mp) (length (tnodes A)))) eqn:E4; [discriminate|].
    destruct (bad_map _ _ _ 0 mp) eqn:E5; [discriminate|].
    destruct (bad_mapped _ _ _ 0 (tnodes A) mp) eqn:E6; [discriminate|].
    destruct (negb (Nat.eqb (length (touts A)) (length (touts B)))) eqn:E7; [discriminate|].
    destruct (bad_pair _ _ 0 (touts A) (touts B)) eqn:E8; [discriminate|].
    destruct (first_dead _ _ _ _ 0 (length (tnodes A))) eqn:E9; [discriminate|].
    apply negb_false_iff, Nat.eqb_eq in E4. apply negb_false_iff, Nat.eqb_eq in E7.
    repeat split; assumption.
  - intros (E1 & E2 & E3 & E4 & E5 & E6 & E7 & E8 & E9).
    rewrite E1, E2, E3, E4, Nat.eqb_refl, E5, E6, E7, Nat.eqb_refl, E8, E9. reflexivity.
Qed.

Section ValidateSound.
  Variable V : Type.
  Variable interp : nat -> list V -> V.
  Variable dflt : V.
  Notation dn := (dnode V interp dflt).

  Theorem validate_sound : forall before after fs mp fi mi us,
    validate before after fs mp fi mi us = None ->
    (forall r p, In (r, p) fs -> dn after p = dn before r) ->
    denote V interp dflt after = denote V interp dflt before.
  Proof.
    intros B A fs mp fi mi us Hv Hrep.
    apply validate_ok in Hv as (E1 & E2 & _ & _ & _ & E6 & _ & E8 & _).
    pose proof (check_wf_spec _ _ E1) as [HnB HoB].
    pose proof (check_wf_spec _ _ E2) as [HnA HoA].
    set (F := fire_table fs) in *.
    set (MT := table mp) in *.
    set (BT := table (tnodes B)) in *.
    (* every argument/output pair accepted by [arg_ok] denotes the same,
       given the claim for smaller mapped nodes *)
    assert (Hpair : forall bound ah ag, ah < bound ->
              (forall h g, h < bound -> nth_error mp h = Some (Some g) -> dn A h = dn B g) ->
              arg_ok F MT ah ag = true -> dn A ah = dn B ag).
    { intros bound ah ag Hb IH Hok. unfold arg_ok in Hok.
      destruct (VarMap.find ag F) as [p|] eqn:Ef.
      - apply Nat.eqb_eq in Hok. subst. apply Hrep. apply fire_table_in. exact Ef.
      - unfold MT in Hok. rewrite table_find in Hok.
        destruct (nth_error mp ah) as [[g|]|] eqn:Em; try discriminate.
        apply Nat.eqb_eq in Hok. subst g. exact (IH ah ag Hb Em). }
    assert (Hnode : forall h g, h < length (tnodes A) -> nth_error mp h = Some (Some g) ->
                    dn A h = dn B g).
    { intro h. induction h as [h IH] using lt_wf_ind. intros g Hh Hm.
      destruct (bad_mapped_spec _ _ _ _ _ _ E6 h g Hh Hm) as (m & Hbt & Hl & Hp).
      unfold BT in Hbt. rewrite table_find in Hbt.
      assert (Hg : g < length (tnodes B)) by (apply nth_error_Some; congruence).
      apply nth_error_nth with (d := tnode0) in Hbt.
      rewrite (dnode_eq V interp dflt A h (fun a => HnA h a Hh) Hh).
      rewrite (dnode_eq V interp dflt B g (fun a => HnB g a Hg) Hg).
      unfold tnode_at. rewrite Hbt, Hl. f_equal.
      apply (bad_pair_map _ F MT _ _ _ _ 0 Hp). intros ah ag Hin Hok.
      pose proof (HnA h ah Hh Hin) as Hlt.
      apply (Hpair h ah ag Hlt); [|exact Hok].
      intros h' g' Hh' Hm'. apply IH; auto. lia. }
    unfold denote. apply (bad_pair_map _ F MT _ _ _ _ 0 E8).
    intros ah ag Hin Hok. apply (Hpair (length (tnodes A)) ah ag (HoA ah Hin)); auto.
  Qed.
End ValidateSound.

(** *** What acceptance says about the graphs: [after] is [before] with the
    firings applied, up to the renaming [mp] *)

(** After argument (or output) [ah] stands for before node [ag]: it is [ag]'s
    replacement, or [ag] is no fired root and [ah] is mapped to it. *)
Definition corr (fs : list (nat * nat)) (mp : list (option nat)) (ah ag : nat) : Prop :=
  In (ag, ah) fs \/ (~ In ag (map fst fs) /\ nth_error mp ah = Some (Some ag)).

(** The nodes of [g] its outputs reach. *)
Inductive reach (g : tgraph) : nat -> Prop :=
| reach_out : forall o, In o (touts g) -> reach g o
| reach_arg : forall k a, reach g k -> k < length (tnodes g) -> In a (targs (tnode_at g k)) -> reach g a.

Lemma fold_add_notin : forall (fs : list (nat * nat)) r (m : VarMap.t nat), ~ In r (map fst fs) ->
  VarMap.find r (fold_left (fun m rp => VarMap.add (fst rp) (snd rp) m) fs m) = VarMap.find r m.
Proof.
  induction fs as [|[a b] fs IH]; intros r m Hn; simpl in *; auto.
  rewrite IH by tauto. rewrite VarMapF.add_neq_o; auto.
Qed.

Lemma fire_table_none : forall fs r, VarMap.find r (fire_table fs) = None -> ~ In r (map fst fs).
Proof.
  unfold fire_table. intros fs.
  assert (G : forall m r, VarMap.find r (fold_left (fun m rp => VarMap.add (fst rp) (snd rp) m) fs m) = None ->
                          ~ In r (map fst fs)).
  { induction fs as [|[a b] fs IH]; intros m r H; simpl in *; [tauto|].
    intros [<-|Hin]; [|exact (IH _ _ H Hin)].
    destruct (in_dec Nat.eq_dec a (map fst fs)) as [Hin|Hn]; [exact (IH _ _ H Hin)|].
    rewrite fold_add_notin in H by exact Hn. rewrite VarMapF.add_eq_o in H; congruence. }
  intros r H. exact (G _ _ H).
Qed.

Lemma bad_firing_spec : forall nb na FI fs f, bad_firing nb na FI f fs = None ->
  (forall r p, In (r, p) fs -> r < nb /\ p < na) /\
  (forall k r p, nth_error fs k = Some (r, p) -> rfind FI r = Some (S (f + k))).
Proof.
  intros nb na FI. induction fs as [|[r p] fs IH]; intros f H; simpl in *.
  - split; [tauto|]. intros [|k]; discriminate.
  - destruct (Nat.ltb r nb && Nat.ltb p na && hint_ok FI r f) eqn:E; [|discriminate].
    apply andb_true_iff in E as [E E3]. apply andb_true_iff in E as [E1 E2].
    apply Nat.ltb_lt in E1. apply Nat.ltb_lt in E2.
    destruct (IH _ H) as (H1 & H2). split.
    + intros r' p' [Heq|Hin]; [inversion Heq; subst; auto | apply (H1 r' p' Hin)].
    + intros [|k] r' p' Hk; simpl in Hk.
      * inversion Hk; subst r' p'. unfold hint_ok in E3.
        destruct (rfind FI r) as [k'|]; [|discriminate]. apply Nat.eqb_eq in E3.
        rewrite Nat.add_0_r. congruence.
      * rewrite (H2 k r' p' Hk). rewrite Nat.add_succ_r. reflexivity.
Qed.

(** Distinct roots. *)
Lemma bad_firing_nodup : forall nb na FI fs, bad_firing nb na FI 0 fs = None ->
  NoDup (map fst fs).
Proof.
  intros nb na FI fs H. apply NoDup_nth_error. intros i j Hi Hij.
  rewrite map_length in Hi. destruct (nth_error fs i) as [[r p]|] eqn:Ei;
    [|apply nth_error_None in Ei; lia].
  rewrite !nth_error_map, Ei in Hij. simpl in Hij.
  destruct (nth_error fs j) as [[r' p']|] eqn:Ej; [|discriminate]. simpl in Hij.
  injection Hij as <-.
  destruct (bad_firing_spec _ _ _ _ _ H) as [_ H2].
  pose proof (H2 i r p Ei) as E1. pose proof (H2 j r p' Ej) as E2. simpl in E1, E2. congruence.
Qed.

Lemma fire_table_nodup : forall fs r p, NoDup (map fst fs) -> In (r, p) fs ->
  VarMap.find r (fire_table fs) = Some p.
Proof.
  unfold fire_table. intros fs. generalize (VarMap.empty nat).
  induction fs as [|[a b] fs IH]; intros m r p Hd Hin; simpl in *; [contradiction|].
  inversion Hd as [|? ? Hn Hd']; subst. destruct Hin as [Heq|Hin].
  - inversion Heq; subst. rewrite fold_add_notin by exact Hn. apply VarMapF.add_eq_o. reflexivity.
  - exact (IH _ _ _ Hd' Hin).
Qed.

Lemma bad_map_spec : forall nb F MI mp h0, bad_map nb F MI h0 mp = None ->
  forall k g, nth_error mp k = Some (Some g) ->
  g < nb /\ VarMap.mem g F = false /\ rfind MI g = Some (S (h0 + k)).
Proof.
  intros nb F MI. induction mp as [|o mp IH]; intros h0 H k g Hk; [destruct k; discriminate|].
  simpl in H. destruct o as [g'|].
  - destruct (Nat.ltb g' nb && hint_ok MI g' h0 && negb (VarMap.mem g' F)) eqn:E; [|discriminate].
    apply andb_true_iff in E as [E E3]. apply andb_true_iff in E as [E1 E2].
    apply Nat.ltb_lt in E1. apply negb_true_iff in E3.
    destruct k as [|k]; simpl in Hk.
    + inversion Hk; subst g'. unfold hint_ok in E2.
      destruct (rfind MI g) as [h'|]; try discriminate. apply Nat.eqb_eq in E2. subst h'.
      rewrite Nat.add_0_r. auto.
    + destruct (IH _ H k g Hk) as (H1 & H2 & H3). rewrite Nat.add_succ_r. simpl in H3. auto.
  - destruct k as [|k]; simpl in Hk; [discriminate|].
    destruct (IH _ H k g Hk) as (H1 & H2 & H3). rewrite Nat.add_succ_r. simpl in H3. auto.
Qed.

(** The map is injective. *)
Lemma bad_map_inj : forall nb F MI mp, bad_map nb F MI 0 mp = None ->
  forall k k' g, nth_error mp k = Some (Some g) -> nth_error mp k' = Some (Some g) -> k' = k.
Proof.
  intros nb F MI mp H k k' g Hk Hk'.
  destruct (bad_map_spec _ _ _ _ _ H k g Hk) as (_ & _ & E).
  destruct (bad_map_spec _ _ _ _ _ H k' g Hk') as (_ & _ & E'). simpl in E, E'. congruence.
Qed.

Lemma bad_pair_forall2 : forall F MT ahs ags j, bad_pair F MT j ahs ags = None ->
  Forall2 (fun ah ag => arg_ok F MT ah ag = true) ahs ags.
Proof.
  intros F MT. induction ahs as [|ah ahs IH]; intros [|ag ags] j H; simpl in *;
    try discriminate; constructor.
  - destruct (arg_ok F MT ah ag); [reflexivity | discriminate].
  - destruct (arg_ok F MT ah ag); [exact (IH _ _ H) | discriminate].
Qed.

Lemma Forall2_weaken : forall (R S : nat -> nat -> Prop) l1 l2,
  (forall x y, R x y -> S x y) -> Forall2 R l1 l2 -> Forall2 S l1 l2.
Proof. intros R S l1 l2 H F. induction F; constructor; auto. Qed.

Lemma arg_ok_corr : forall fs mp ah ag,
  arg_ok (fire_table fs) (table mp) ah ag = true ->
  corr fs mp ah ag.
Proof.
  intros fs mp ah ag H. unfold arg_ok, corr in *.
  destruct (VarMap.find ag (fire_table fs)) as [p|] eqn:Ef.
  - apply Nat.eqb_eq in H. subst. left. exact (fire_table_in _ _ _ Ef).
  - right. split; [exact (fire_table_none _ _ Ef)|]. rewrite table_find in H.
    destruct (nth_error mp ah) as [[g|]|]; try discriminate. apply Nat.eqb_eq in H. congruence.
Qed.

Lemma first_dead_spec : forall na AT OT US k h, first_dead na AT OT US h k = None ->
  forall x, h <= x < h + k -> live_ok na AT OT US x = true.
Proof.
  intros na AT OT US k. induction k as [|k IH]; intros h H x Hx; simpl in *; [lia|].
  destruct (live_ok na AT OT US h) eqn:E; [|discriminate].
  destruct (Nat.eq_dec x h) as [->|]; [exact E|]. apply (IH (S h) H). lia.
Qed.

(** A node each of whose later nodes is reached, shown live, is reached. *)
Lemma shown_reach : forall g US,
  (forall h, h < length (tnodes g) ->
     live_ok (length (tnodes g)) (table (tnodes g)) (table (touts g)) US h = true) ->
  forall h, h < length (tnodes g) -> reach g h.
Proof.
  intros g US Hl.
  assert (G : forall d h, length (tnodes g) - h <= d -> h < length (tnodes g) -> reach g h).
  { intro d. induction d as [|d IH]; intros h Hd Hh; [lia|].
    pose proof (Hl h Hh) as E. unfold live_ok in E.
    destruct (rfind US h) as [u|]; [|discriminate].
    destruct (Nat.ltb u (length (tnodes g))) eqn:Eu.
    - apply Nat.ltb_lt in Eu. apply andb_true_iff in E as [E1 E2]. apply Nat.ltb_lt in E1.
      rewrite table_find in E2. destruct (nth_error (tnodes g) u) as [n|] eqn:En; [|discriminate].
      apply existsb_exists in E2 as [x [Hx Ex]]. apply Nat.eqb_eq in Ex. subst x.
      apply (reach_arg g u h (IH u ltac:(lia) Eu) Eu).
      unfold tnode_at. rewrite (nth_error_nth _ _ _ En). exact Hx.
    - rewrite table_find in E.
      destruct (nth_error (touts g) (u - length (tnodes g))) as [o|] eqn:Eo; [|discriminate].
      apply Nat.eqb_eq in E. subst o. apply reach_out. exact (nth_error_In _ _ Eo). }
  intros h Hh. exact (G (length (tnodes g) - h) h (le_n _) Hh).
Qed.

Theorem validate_renaming : forall before after fs mp fi mi us,
  validate before after fs mp fi mi us = None ->
  wf_tgraph before /\ wf_tgraph after /\
  (forall r p, In (r, p) fs -> r < length (tnodes before) /\ p < length (tnodes after)) /\
  NoDup (map fst fs) /\
  length mp = length (tnodes after) /\
  (forall h g, nth_error mp h = Some (Some g) ->
     g < length (tnodes before) /\ ~ In g (map fst fs) /\
     (forall h', nth_error mp h' = Some (Some g) -> h' = h) /\
     tlabel (tnode_at after h) = tlabel (tnode_at before g) /\
     Forall2 (corr fs mp) (targs (tnode_at after h)) (targs (tnode_at before g))) /\
  Forall2 (corr fs mp) (touts after) (touts before) /\
  (forall h, h < length (tnodes after) -> reach after h).
Proof.
  intros B A fs mp fi mi us Hv.
  apply validate_ok in Hv as (E1 & E2 & E3 & E4 & E5 & E6 & _ & E8 & E9).
  pose proof (check_wf_spec _ _ E1) as HwB. pose proof (check_wf_spec _ _ E2) as HwA.
  destruct (bad_firing_spec _ _ _ _ _ E3) as (Hf1 & _). pose proof (bad_firing_nodup _ _ _ _ E3) as Hf2.
  split; [exact HwB|]. split; [exact HwA|]. split; [exact Hf1|]. split; [exact Hf2|].
  split; [exact E4|]. split.
  - intros h g Hm. destruct (bad_map_spec _ _ _ _ _ E5 h g Hm) as (Hg & HF & _).
    pose proof (fun h' => bad_map_inj _ _ _ _ E5 h h' g Hm) as Hinj.
    assert (Hh : h < length (tnodes A)) by (rewrite <- E4; apply nth_error_Some; congruence).
    destruct (bad_mapped_spec _ _ _ _ _ _ E6 h g Hh Hm) as (m & Hbt & Hl & Hp).
    rewrite table_find in Hbt. apply nth_error_nth with (d := tnode0) in Hbt.
    unfold tnode_at. rewrite Hbt. repeat split; auto.
    + intro Hin. apply in_map_iff in Hin as [[r p] [Hr Hin]]. simpl in Hr. subst r.
      rewrite VarMapF.mem_find_b, (fire_table_nodup _ _ _ Hf2 Hin) in HF. discriminate.
    + eapply Forall2_weaken; [|exact (bad_pair_forall2 _ _ _ _ _ Hp)]. apply arg_ok_corr.
  - split.
    + eapply Forall2_weaken; [|exact (bad_pair_forall2 _ _ _ _ _ E8)]. apply arg_ok_corr.
    + apply (shown_reach A us). intros h Hh. exact (first_dead_spec _ _ _ _ _ _ E9 h ltac:(lia)).
Qed.

(** *** The equation form: [after] is [replace] of [before] with the new
    nodes inserted, up to a bijective renaming of nodes

    The validator's before graph does not hold the replacement nodes (they
    are new nodes of [after], [map = None]), while [replace] takes them as
    nodes of its graph placed before their roots. [extension before after
    mp eB eN g]: [g] is [before] with the new nodes of [after] added, in any
    order; [eB] places before's nodes in [g] and [eN] places the new nodes,
    whose arguments are placed by [embed] (a mapped after node goes where
    its before node does). [validate_replace]: when the validator accepts
    and [g] is well formed with each replacement before its root, firing
    the translated firings on [g] gives [after], up to a renaming [tiso]. *)

(** [σ] renames the nodes of [g] to those of [h], one to one and onto,
    keeping labels, arguments and outputs. *)
Definition tiso (σ : nat -> nat) (g h : tgraph) : Prop :=
  (forall i, i < length (tnodes g) -> σ i < length (tnodes h) /\
     tnode_at h (σ i) = mkTNode (tlabel (tnode_at g i)) (map σ (targs (tnode_at g i)))) /\
  (forall i j, i < length (tnodes g) -> j < length (tnodes g) -> σ i = σ j -> i = j) /\
  (forall j, j < length (tnodes h) -> exists i, i < length (tnodes g) /\ σ i = j) /\
  touts h = map σ (touts g).

(** Where an after node goes in the extended graph: its before node's place
    if it is mapped, else its own. *)
Definition embed (mp : list (option nat)) (eB eN : nat -> nat) (h : nat) : nat :=
  match nth_error mp h with Some (Some g) => eB g | _ => eN h end.

(** The firings in the extended graph's indices. *)
Definition embed_firings (mp : list (option nat)) (eB eN : nat -> nat) (fs : list (nat * nat))
    : list (nat * nat) :=
  map (fun rp => (eB (fst rp), embed mp eB eN (snd rp))) fs.

(** [g] is [before] (renamed by [eB]) with the new nodes of [after] (renamed
    by [eN]) added: the places are distinct, and [g]'s outputs are before's. *)
Definition extension (before after : tgraph) (mp : list (option nat)) (eB eN : nat -> nat)
    (g : tgraph) : Prop :=
  (forall i, i < length (tnodes before) -> eB i < length (tnodes g) /\
     tnode_at g (eB i) = mkTNode (tlabel (tnode_at before i)) (map eB (targs (tnode_at before i)))) /\
  (forall h, nth_error mp h = Some None -> eN h < length (tnodes g) /\
     tnode_at g (eN h) = mkTNode (tlabel (tnode_at after h)) (map (embed mp eB eN) (targs (tnode_at after h)))) /\
  (forall i j, i < length (tnodes before) -> j < length (tnodes before) -> eB i = eB j -> i = j) /\
  (forall h k, nth_error mp h = Some None -> nth_error mp k = Some None -> eN h = eN k -> h = k) /\
  (forall i h, i < length (tnodes before) -> nth_error mp h = Some None -> eB i <> eN h) /\
  touts g = map eB (touts before).

(** The live nodes are reached from the outputs. *)
Lemma sweep_sound : forall (P : nat -> Prop) ns k m,
  (forall j a, P j -> In a (targs (nth j ns tnode0)) -> P a) ->
  (forall i, m i = true -> P i) -> forall i, sweep ns k m i = true -> P i.
Proof.
  intros P ns k. induction k as [|k IH]; intros m Hc Hm i Hi; simpl in *; [exact (Hm i Hi)|].
  refine (IH _ Hc _ i Hi).
  intros j Hj. destruct (m k) eqn:Mk; [|exact (Hm j Hj)].
  apply orb_true_iff in Hj as [Hj|Hj]; [exact (Hm j Hj)|].
  apply existsb_exists in Hj as [a [Ha E]]. apply Nat.eqb_eq in E. subst a.
  exact (Hc k j (Hm k Mk) Ha).
Qed.

Lemma live_reach : forall g i, live g i = true -> reach g i.
Proof.
  intros g i H. unfold live in H. apply (sweep_sound (reach g)) in H; [exact H|..].
  - intros j a Hj Ha. destruct (Nat.lt_ge_cases j (length (tnodes g))) as [Hl|Hl].
    + exact (reach_arg g j a Hj Hl Ha).
    + rewrite nth_overflow in Ha by exact Hl. contradiction.
  - intros o Ho. apply existsb_exists in Ho as [a [Ha E]]. apply Nat.eqb_eq in E. subst.
    exact (reach_out g a Ha).
Qed.

Lemma reach_live : forall g, wf_tgraph g -> forall i, reach g i -> live g i = true.
Proof.
  intros g Hw i H. induction H as [o Ho|k a _ IH Hk Ha].
  - exact (live_out g o Ho).
  - exact (live_closed g Hw k a Hk IH Ha).
Qed.

(** A graph [R] holding a copy of [a] ([E] places it, one to one, outputs
    included), with every node of [a] reached from its outputs, prunes to
    [a] up to a renaming. *)
Lemma prune_copy : forall (a R : tgraph) (E : nat -> nat), wf_tgraph a -> wf_tgraph R ->
  (forall h, h < length (tnodes a) -> E h < length (tnodes R) /\
     tnode_at R (E h) = mkTNode (tlabel (tnode_at a h)) (map E (targs (tnode_at a h)))) ->
  (forall h k, h < length (tnodes a) -> k < length (tnodes a) -> E h = E k -> h = k) ->
  touts R = map E (touts a) ->
  (forall h, h < length (tnodes a) -> reach a h) ->
  tiso (fun h => renum (live R) (E h)) a (prune R).
Proof.
  intros a R E [Hna Hoa] HwR Hn Hinj Ho Hr.
  (* the copy is live *)
  assert (Hl : forall h, reach a h -> live R (E h) = true).
  { intros h H. induction H as [o Hoo|k x _ IH Hk Hx].
    - apply live_out. rewrite Ho. apply in_map. exact Hoo.
    - destruct (Hn k Hk) as [HkR Hat].
      apply (live_closed R HwR (E k) (E x) HkR IH). rewrite Hat. simpl. apply in_map. exact Hx. }
  (* and nothing else is *)
  assert (Hc : forall i, reach R i -> exists h, h < length (tnodes a) /\ E h = i).
  { intros i H. induction H as [o Hoo|k x _ IH Hk Hx].
    - rewrite Ho in Hoo. apply in_map_iff in Hoo as [h [<- Hh]]. exists h. split; auto.
    - destruct IH as [h [Hh <-]]. rewrite (proj2 (Hn h Hh)) in Hx. simpl in Hx.
      apply in_map_iff in Hx as [y [<- Hy]]. exists y. split; auto.
      specialize (Hna h y Hh Hy). lia. }
  split; [|split; [|split]].
  - intros h Hh. destruct (Hn h Hh) as [HR Hat].
    destruct (renum_nth (live R) _ _ HR (Hl h (Hr h Hh))) as [Hnth Hlt].
    rewrite <- prune_length in Hlt. split; [exact Hlt|].
    rewrite (prune_at R _ Hlt). cbv zeta. rewrite Hnth, Hat. simpl. rewrite map_map. reflexivity.
  - intros h k Hh Hk Heq. apply Hinj; auto.
    pose proof (Hl h (Hr h Hh)) as Lh. pose proof (Hl k (Hr k Hk)) as Lk.
    destruct (Nat.lt_total (E h) (E k)) as [Hlt|[Hlt|Hlt]]; auto.
    + pose proof (renum_lt (live R) _ _ Hlt Lh). lia.
    + pose proof (renum_lt (live R) _ _ Hlt Lk). lia.
  - intros j Hj. rewrite prune_length in Hj.
    destruct (filter_seq_nth (live R) _ j Hj) as (_ & Lk & Rk).
    destruct (Hc _ (live_reach R _ Lk)) as [h [Hh He]].
    exists h. split; [exact Hh|]. rewrite He. exact Rk.
  - simpl. rewrite Ho, map_map. reflexivity.
Qed.

Lemma rep_of_in : forall fs a b,
  (forall r p p', In (r, p) fs -> In (r, p') fs -> p = p') -> In (a, b) fs -> rep_of fs a = b.
Proof.
  intros fs a b Hu Hin. unfold rep_of.
  destruct (find (fun p => Nat.eqb (fst p) a) fs) as [[x y]|] eqn:Ef.
  - apply find_some in Ef as [Hxy Heq]. simpl in Heq. apply Nat.eqb_eq in Heq. subst x.
    exact (Hu a y b Hxy Hin).
  - apply (find_none _ _ Ef) in Hin. simpl in Hin. rewrite Nat.eqb_refl in Hin. discriminate.
Qed.

Lemma rep_of_notin : forall fs a, ~ In a (map fst fs) -> rep_of fs a = a.
Proof.
  intros fs a Hn. destruct (rep_of_cases fs a) as [E|E]; [exact E|].
  exfalso. apply Hn. apply in_map_iff. exists (a, rep_of fs a). auto.
Qed.

Lemma nodup_fst_fun : forall (l : list (nat * nat)) r p p',
  NoDup (map fst l) -> In (r, p) l -> In (r, p') l -> p = p'.
Proof.
  induction l as [|[x y] l IH]; intros r p p' Hd H1 H2; simpl in *; [contradiction|].
  inversion Hd as [|? ? Hn Hd']; subst.
  destruct H1 as [H1|H1]; destruct H2 as [H2|H2].
  - congruence.
  - inversion H1; subst. exfalso. apply Hn. apply in_map_iff. exists (r, p'). auto.
  - inversion H2; subst. exfalso. apply Hn. apply in_map_iff. exists (r, p). auto.
  - exact (IH _ _ _ Hd' H1 H2).
Qed.

Theorem validate_replace : forall before after fs mp fi mi us eB eN g,
  validate before after fs mp fi mi us = None ->
  extension before after mp eB eN g -> wf_tgraph g -> firings_ok g (embed_firings mp eB eN fs) ->
  exists σ, tiso σ after (replace g (embed_firings mp eB eN fs)).
Proof.
  intros B A fs mp fi mi us eB eN g Hv Hx Hwg Hf.
  destruct (validate_renaming _ _ _ _ _ _ _ Hv) as (HwB & HwA & Hf1 & Hnd & Hlen & Hm & Hout & Hreach).
  destruct Hx as (HxB & HxN & HiB & HiN & Hdis & Hxo).
  set (E := embed mp eB eN). set (fs' := embed_firings mp eB eN fs).
  set (nb := length (tnodes B)) in *.
  (* every after node is mapped or new *)
  assert (Hsome : forall h, h < length (tnodes A) -> exists o, nth_error mp h = Some o).
  { intros h Hh. destruct (nth_error mp h) as [o|] eqn:Eh; [eauto|].
    apply nth_error_None in Eh. lia. }
  (* a before node that is no fired root is no root of [fs'] *)
  assert (Hroot : forall x, x < nb -> ~ In x (map fst fs) -> ~ In (eB x) (map fst fs')).
  { intros x Hx Hn Hin. apply Hn. unfold fs', embed_firings in Hin. rewrite map_map in Hin.
    apply in_map_iff in Hin as [[r p] [Hr Hin]]. simpl in Hr.
    destruct (Hf1 r p Hin) as [Hrb _]. rewrite <- (HiB r x Hrb Hx Hr).
    apply in_map_iff. exists (r, p). auto. }
  (* a before argument or output read through the firings is its after counterpart *)
  assert (Hcorr : forall ah ag, ag < nb -> corr fs mp ah ag -> rep_of fs' (eB ag) = E ah).
  { intros ah ag Hag [Hin|[Hn Hmp]].
    - apply rep_of_in; [|apply (in_map (fun rp => (eB (fst rp), E (snd rp))) fs (ag, ah) Hin)].
      intros r p p' H1 H2. unfold fs', embed_firings in H1, H2.
      apply in_map_iff in H1 as [[r1 p1] [H1 Hi1]]. apply in_map_iff in H2 as [[r2 p2] [H2 Hi2]].
      simpl in H1, H2. inversion H1. inversion H2. subst.
      destruct (Hf1 _ _ Hi1) as [Hr1 _]. destruct (Hf1 _ _ Hi2) as [Hr2 _].
      pose proof (HiB r1 r2 Hr1 Hr2 ltac:(congruence)) as <-.
      rewrite (nodup_fst_fun fs r1 p1 p2 Hnd Hi1 Hi2). reflexivity.
    - unfold E, embed. rewrite Hmp. exact (rep_of_notin fs' _ (Hroot ag Hag Hn)). }
  assert (Hmaps : forall l1 l2, Forall2 (corr fs mp) l1 l2 -> (forall x, In x l2 -> x < nb) ->
                  map (rep_of fs') (map eB l2) = map E l1).
  { intros l1 l2 H. induction H as [|x y l1 l2 Hxy _ IH]; intros Hl; simpl; [reflexivity|].
    rewrite (Hcorr x y (Hl y (or_introl eq_refl)) Hxy). f_equal.
    apply IH. intros z Hz. apply Hl. right. exact Hz. }
  (* the place of an after node is no root of [fs'] *)
  assert (Hnot : forall h, h < length (tnodes A) -> ~ In (E h) (map fst fs')).
  { intros h Hh. destruct (Hsome h Hh) as [[g0|] Eh]; unfold E, embed; rewrite Eh.
    - destruct (Hm h g0 Eh) as (Hg0 & Hn & _). exact (Hroot g0 Hg0 Hn).
    - intro Hin. unfold fs', embed_firings in Hin. rewrite map_map in Hin.
      apply in_map_iff in Hin as [[r p] [Hr Hin]]. simpl in Hr.
      exact (Hdis r h (proj1 (Hf1 r p Hin)) Eh Hr). }
  assert (HwR := redirect_wf g fs' Hwg Hf).
  exists (fun h => renum (live (redirect fs' g)) (E h)). unfold replace.
  apply prune_copy; [exact HwA | exact HwR | | | | exact Hreach].
  - intros h Hh. rewrite redirect_length. destruct (Hsome h Hh) as [[g0|] Eh].
    + destruct (Hm h g0 Eh) as (Hg0 & _ & _ & Hl & Ha).
      destruct (HxB g0 Hg0) as [Hlt Hat].
      assert (He : E h = eB g0) by (unfold E, embed; rewrite Eh; reflexivity).
      rewrite He. split; [exact Hlt|]. rewrite (redirect_at fs' g _ Hlt), Hat. simpl.
      rewrite Hl. f_equal. apply Hmaps; [exact Ha|].
      intros x Hx. destruct HwB as [HnB _]. specialize (HnB g0 x Hg0 Hx). unfold nb. lia.
    + destruct (HxN h Eh) as [Hlt Hat].
      assert (He : E h = eN h) by (unfold E, embed; rewrite Eh; reflexivity).
      rewrite He. split; [exact Hlt|]. rewrite (redirect_at fs' g _ Hlt), Hat. simpl.
      f_equal. rewrite map_map. apply map_ext_in. intros x Hx. apply rep_of_notin, Hnot.
      destruct HwA as [HnA _]. specialize (HnA h x Hh Hx). lia.
  - intros h k Hh Hk. destruct (Hsome h Hh) as [[g1|] E1]; destruct (Hsome k Hk) as [[g2|] E2];
      unfold E, embed; rewrite E1, E2; intro Heq.
    + destruct (Hm h g1 E1) as (Hg1 & _ & Hu & _). destruct (Hm k g2 E2) as (Hg2 & _).
      pose proof (HiB g1 g2 Hg1 Hg2 Heq) as <-. symmetry. exact (Hu k E2).
    + exfalso. exact (Hdis g1 k (proj1 (Hm h g1 E1)) E2 Heq).
    + exfalso. exact (Hdis g2 h (proj1 (Hm k g2 E2)) E1 (eq_sym Heq)).
    + exact (HiN h k E1 E2 Heq).
  - simpl. rewrite Hxo. apply Hmaps; [exact Hout|]. destruct HwB as [_ HoB]. exact HoB.
Qed.

(** Examples. A single firing ([x; r = f x; o = h r] to [x; p = k x; o = h p],
    [r] replaced by the new node [p]): the validator accepts, the graph
    with [p] inserted before [r] is an [extension], and [replace] on it
    gives the after graph exactly. *)
Definition ex_before := mkTGraph [mkTNode 1 []; mkTNode 2 [0]; mkTNode 3 [1]] [2].
Definition ex_after := mkTGraph [mkTNode 1 []; mkTNode 4 [0]; mkTNode 3 [1]] [2].
Definition ex_map := [Some 0; None; Some 2].
Definition ex_eB (i : nat) := match i with 0 => 0 | 1 => 2 | _ => 3 end.
Definition ex_eN (h : nat) := 1.
Definition ex_ext := mkTGraph [mkTNode 1 []; mkTNode 4 [0]; mkTNode 2 [0]; mkTNode 3 [2]] [3].

Example ex_ok :
  validate ex_before ex_after [(1, 1)] ex_map (table [0; 1; 0]) (table [1; 0; 3]) (table [1; 2; 3])
  = None.
Proof. reflexivity. Qed.
Example ex_replace : replace ex_ext (embed_firings ex_map ex_eB ex_eN [(1, 1)]) = ex_after.
Proof. reflexivity. Qed.
Example ex_extension : extension ex_before ex_after ex_map ex_eB ex_eN ex_ext.
Proof.
  unfold ex_eN.
  split; [|split; [|split; [|split; [|split]]]].
  - intros [|[|[|i]]] Hi; simpl in *; try lia; split; try reflexivity; lia.
  - intros [|[|[|h]]] Hh; simpl in *; try (destruct h; discriminate); try discriminate;
      split; try reflexivity; lia.
  - intros [|[|[|i]]] [|[|[|j]]] Hi Hj; simpl in *; try lia; discriminate.
  - intros [|[|[|h]]] [|[|[|k]]] Hh Hk; simpl in *; try (destruct h; discriminate);
      try (destruct k; discriminate); try discriminate; reflexivity.
  - intros [|[|[|i]]] [|[|[|h]]] Hi Hh; simpl in *; try lia; try (destruct h; discriminate);
      discriminate.
  - reflexivity.
Qed.

(** A pass the validator accepts but no extension fits: two firings
    ([r -> p], [r2 -> p2]) whose replacement [p] uses [y], a user of [r2],
    itself a user of [r]; in any extension [r < r2 < y < p], and the firing
    wants [p < r]. Such a pass is not one [replace] of [before], which is
    why [validate_replace] takes the extension as a hypothesis. *)
Definition cyc_before := mkTGraph [mkTNode 1 []; mkTNode 2 [0]; mkTNode 3 [1]; mkTNode 4 [2]] [3; 1].
Definition cyc_after := mkTGraph [mkTNode 1 []; mkTNode 5 [0]; mkTNode 4 [1]; mkTNode 6 [2]] [2; 3].
Definition cyc_firings := [(1, 3); (2, 1)].
Definition cyc_map := [Some 0; None; Some 3; None].
Example cyc_ok :
  validate cyc_before cyc_after cyc_firings cyc_map (table [0; 1; 2; 0]) (table [1; 0; 0; 3])
    (table [1; 2; 4; 5]) = None.
Proof. reflexivity. Qed.
Example cyc_no_extension : forall eB eN g,
  extension cyc_before cyc_after cyc_map eB eN g -> wf_tgraph g ->
  ~ firings_ok g (embed_firings cyc_map eB eN cyc_firings).
Proof.
  intros eB eN g (HxB & HxN & _) [Hn _] Hf.
  destruct (HxB 2 ltac:(simpl; lia)) as [L2 A2]. destruct (HxB 3 ltac:(simpl; lia)) as [L3 A3].
  destruct (HxN 3 eq_refl) as [Lp Ap].
  pose proof (Hn (eB 2) (eB 1) L2 ltac:(rewrite A2; simpl; auto)).
  pose proof (Hn (eB 3) (eB 2) L3 ltac:(rewrite A3; simpl; auto)).
  pose proof (Hn (eN 3) (eB 3) Lp ltac:(rewrite Ap; simpl; auto)).
  destruct (Hf (eB 1) (eN 3) ltac:(simpl; auto)). lia.
Qed.
