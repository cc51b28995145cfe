(** * The root-operator index: which operators a definition's root can have

    For each definition of a table, [root_index] gives a [rootset]: [RAny]
    (the root may have any operator: a variable or an operator variable at
    the root) or [RSyms l] (the root's operator is one of [l]). The index is
    the least solution of
      root(x) = any, root(F(..)) = any, root(f(..)) = {f},
      root(p ‖ p') = root(p) ∪ root(p'),
      root(p ; g) = root(∃x.p) = root(∃F.p) = root(p ; (p' ≈ x)) = root(p),
      root(P(..)) = index(P)
    computed by Kleene iteration from [RSyms []] (at most [index_rounds]
    rounds; if it has not converged by then, every definition gets [RAny]).
    Derivations are finite, so a cycle of calls at the root adds nothing:
    for [P(x) = P(x) ‖ Relu(x)] the index is [{Relu}].

    [root_index_sound]: a definition whose index does not contain a node's
    operator has no declarative match at that node, for any substitution.
    Soundness needs no proof about the iteration: the result is checked to
    be a post-fixpoint ([post_from]), and the fallback (the empty map,
    where every lookup is [RAny]) is one. *)

From Coq Require Import List Bool Arith Lia.
From PyPM Require Import Syntax Subst Declarative.
Import ListNotations.

Inductive rootset :=
| RAny                       (** any operator *)
| RSyms (l : list symbol).   (** one of [l] *)

(** Union of two lists sorted in increasing order (a merge; it contains
    every element of both whether or not they are sorted). *)
Fixpoint sunion (l1 : list nat) : list nat -> list nat :=
  match l1 with
  | [] => fun l2 => l2
  | x :: l1' =>
      fix go (l2 : list nat) : list nat :=
        match l2 with
        | [] => l1
        | y :: l2' =>
            if Nat.ltb x y then x :: sunion l1' l2
            else if Nat.ltb y x then y :: go l2'
            else x :: sunion l1' l2'
        end
  end.

Lemma In_sunion : forall l1 l2 z, In z l1 \/ In z l2 -> In z (sunion l1 l2).
Proof.
  induction l1 as [|x l1 IH]; intros l2 z H; simpl.
  - destruct H as [[]|H]. exact H.
  - induction l2 as [|y l2 IH2].
    + destruct H as [H|[]]. exact H.
    + destruct (Nat.ltb x y) eqn:E1; [|destruct (Nat.ltb y x) eqn:E2].
      * destruct H as [[<-|H]|H]; [left; reflexivity | right; apply IH; auto
                                   | right; apply IH; auto].
      * destruct H as [[<-|H]|[<-|H]].
        -- right. apply IH2. left. left. reflexivity.
        -- right. apply IH2. left. right. exact H.
        -- left. reflexivity.
        -- right. apply IH2. right. exact H.
      * apply Nat.ltb_ge in E1, E2. assert (x = y) by lia. subst y.
        destruct H as [[<-|H]|[<-|H]]; try (left; reflexivity);
          right; apply IH; auto.
Qed.

Definition rs_mem (f : symbol) (r : rootset) : bool :=
  match r with RAny => true | RSyms l => memb f l end.

Definition rs_union (a b : rootset) : rootset :=
  match a, b with
  | RSyms l1, RSyms l2 => RSyms (sunion l1 l2)
  | _, _ => RAny
  end.

(** [a ⊆ b] *)
Definition rs_le (a b : rootset) : bool :=
  match a, b with
  | _, RAny => true
  | RAny, RSyms _ => false
  | RSyms l1, RSyms l2 => subset l1 l2
  end.

Lemma rs_mem_union : forall f a b,
  rs_mem f a = true \/ rs_mem f b = true -> rs_mem f (rs_union a b) = true.
Proof.
  intros f [|l1] [|l2] H; simpl in *; auto.
  apply memb_In. apply In_sunion.
  destruct H as [H|H]; apply memb_In in H; auto.
Qed.

Lemma rs_mem_le : forall f a b, rs_le a b = true -> rs_mem f a = true -> rs_mem f b = true.
Proof.
  intros f [|l1] [|l2] Hle H; simpl in *; auto; try discriminate.
  apply memb_In. apply memb_In in H. eapply subset_In; eauto.
Qed.

(** An index: definition number -> its rootset ([RAny] when absent). *)
Definition rindex := VarMap.t rootset.

Definition ri_find (R : rindex) (P : pname) : rootset :=
  match VarMap.find P R with Some r => r | None => RAny end.

(** The operators the root of [p] can have, reading calls in [R]. *)
Fixpoint root_of (R : rindex) (p : pattern) : rootset :=
  match p with
  | PVar _ | PFunVar _ _ => RAny
  | PApp f _ => RSyms [f]
  | PAlt p1 p2 => rs_union (root_of R p1) (root_of R p2)
  | PGuard p _ | PExists _ p | PExistsF _ p | PConstr p _ _ => root_of R p
  | PCall P _ _ => ri_find R P
  end.

(** [acc] extended with [i + j ↦ f d_j] for the [j]-th definition [d_j]. *)
Fixpoint tabulate (f : pdef -> rootset) (D : list pdef) (i : nat) (acc : rindex) : rindex :=
  match D with
  | [] => acc
  | d :: D' => tabulate f D' (S i) (VarMap.add i (f d) acc)
  end.

Lemma find_tabulate : forall f D i acc j,
  VarMap.find j (tabulate f D i acc) =
    if Nat.leb i j then
      match nth_error D (j - i) with
      | Some d => Some (f d)
      | None => VarMap.find j acc
      end
    else VarMap.find j acc.
Proof.
  intros f D. induction D as [|d D IH]; intros i acc j; simpl.
  - destruct (Nat.leb i j); [destruct (j - i)|]; reflexivity.
  - rewrite IH. destruct (Nat.eqb i j) eqn:E.
    + apply Nat.eqb_eq in E. subst j.
      destruct (Nat.leb (S i) i) eqn:L; [apply Nat.leb_le in L; lia|].
      rewrite Nat.leb_refl, Nat.sub_diag. simpl.
      apply VarMapF.add_eq_o. reflexivity.
    + apply Nat.eqb_neq in E.
      rewrite VarMapF.add_neq_o by exact E.
      destruct (Nat.leb (S i) j) eqn:L1; destruct (Nat.leb i j) eqn:L2;
        rewrite ?Nat.leb_le, ?Nat.leb_gt in *; try lia; auto.
      replace (j - i) with (S (j - S i)) by lia. simpl. reflexivity.
Qed.

(** One round of the iteration: every definition's [root_of] in [R]. *)
Definition index_step (D : list pdef) (R : rindex) : rindex :=
  tabulate (fun d => root_of R (body d)) D 0 (VarMap.empty rootset).

(** The start: no definition matches anything. *)
Definition index_bottom (D : list pdef) : rindex :=
  tabulate (fun _ => RSyms []) D 0 (VarMap.empty rootset).

(** [R] is a post-fixpoint for the definitions [D] numbered from [i]. *)
Fixpoint post_from (D : list pdef) (R : rindex) (i : nat) : bool :=
  match D with
  | [] => true
  | d :: D' => rs_le (root_of R (body d)) (ri_find R i) && post_from D' R (S i)
  end.

Lemma post_from_nth : forall D R i j d,
  post_from D R i = true -> nth_error D j = Some d ->
  rs_le (root_of R (body d)) (ri_find R (i + j)) = true.
Proof.
  induction D as [|d0 D IH]; intros R i j d H Hn; [destruct j; discriminate|].
  simpl in H. apply andb_true_iff in H. destruct H as [H1 H2].
  destruct j as [|j]; simpl in Hn.
  - inversion Hn; subst. rewrite Nat.add_0_r. exact H1.
  - replace (i + S j) with (S i + j) by lia. eauto.
Qed.

Lemma post_from_empty : forall D i, post_from D (VarMap.empty rootset) i = true.
Proof.
  induction D as [|d D IH]; intros i; simpl; auto.
  rewrite IH, andb_true_r. unfold ri_find. rewrite VarMapF.empty_o.
  destruct (root_of _ (body d)); reflexivity.
Qed.

Fixpoint iterate (D : list pdef) (k : nat) (R : rindex) : option rindex :=
  if post_from D R 0 then Some R
  else match k with
       | O => None
       | S k' => iterate D k' (index_step D R)
       end.

Lemma iterate_post : forall D k R R', iterate D k R = Some R' -> post_from D R' 0 = true.
Proof.
  intros D k. induction k as [|k IH]; intros R R' H; simpl in H;
    destruct (post_from D R 0) eqn:E; try discriminate; try (inversion H; subst; exact E).
  eapply IH; eauto.
Qed.

(** A chain of calls at the root [P0 → P1 → … → Pk] needs [k + 1] rounds. *)
Definition index_rounds : nat := 64.

Definition root_index (D : list pdef) : rindex :=
  match iterate D index_rounds (index_bottom D) with
  | Some R => R
  | None => VarMap.empty rootset
  end.

Lemma root_index_post : forall D, post_from D (root_index D) 0 = true.
Proof.
  intros D. unfold root_index.
  destruct (iterate D index_rounds (index_bottom D)) eqn:E.
  - eapply iterate_post; eauto.
  - apply post_from_empty.
Qed.

Section Sound.
  Variable G : graph.
  Variable D : list pdef.

  (** A match's root has an operator of [root_of R p], for a
      post-fixpoint [R]. *)
  Lemma root_of_sound : forall R, post_from D R 0 = true ->
    forall σ ψ p t, matches G D σ ψ p t -> rs_mem (label G t) (root_of R p) = true.
  Proof.
    intros R HR σ ψ p t H.
    induction H using matches_mut with
      (P0 := fun _ _ _ _ _ => True); simpl; auto.
    - rewrite e. simpl. rewrite Nat.eqb_refl. reflexivity.
    - apply rs_mem_union. auto.
    - apply rs_mem_union. auto.
    - eapply rs_mem_le; [|exact IHmatches].
      apply (post_from_nth D R 0 P d HR e).
  Qed.

  (** The index is sound: a definition whose index does not allow the
      node's operator has no match there, whatever the substitutions. *)
  Theorem root_index_sound : forall P d σ ψ t,
    nth_error D P = Some d -> matches G D σ ψ (body d) t ->
    rs_mem (label G t) (ri_find (root_index D) P) = true.
  Proof.
    intros P d σ ψ t Hd Hm.
    eapply rs_mem_le; [|eapply root_of_sound; [apply root_index_post | exact Hm]].
    apply (post_from_nth D _ 0 P d (root_index_post D) Hd).
  Qed.

  Corollary root_index_no_match : forall P d σ ψ t,
    nth_error D P = Some d ->
    rs_mem (label G t) (ri_find (root_index D) P) = false ->
    ~ matches G D σ ψ (body d) t.
  Proof.
    intros P d σ ψ t Hd Hno Hm. rewrite (root_index_sound P d σ ψ t Hd Hm) in Hno.
    discriminate.
  Qed.
End Sound.
