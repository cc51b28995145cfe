(** * The root-operator index: which operators a definition's root can have

    For each definition of a table, [root_index] gives a [rootset]: [RAny]
    (the root may have any operator: a variable or an operator variable at
    the root) or [RSyms l cs] (the root's operator is one of [l], or has,
    for one [(a, c)] of [cs], attribute [a] equal to [c]: the operator
    variable of [F(..) ; guard(F.a = c ∧ …)]). The index is the least
    solution of
      root(x) = any, root(F(..)) = any, root(f(..)) = {f},
      root(F(..) ; g) = {operators with a = c} when [g] has a conjunct F.a = c,
      root(p ‖ p') = root(p) ∪ root(p'),
      root(p ; g) = root(∃x.p) = root(∃F.p) = root(p ; (p' ≈ x)) = root(p),
      root(P(..)) = index(P)
    computed by Kleene iteration from [RSyms [] []] (at most [index_rounds]
    rounds; if it has not converged by then, every definition gets [RAny]).
    Derivations are finite, so a cycle of calls at the root adds nothing:
    for [P(x) = P(x) ‖ Relu(x)] the index is [{Relu}].

    [root_index_sound]: a definition whose index does not allow a node's
    operator (with the graph's attributes of it, [admits]) has no
    declarative match at that node, for any substitution.
    Soundness needs no proof about the iteration: the result is checked to
    be a post-fixpoint ([post_from]), and the fallback (the empty map,
    where every lookup is [RAny]) is one. *)

From Coq Require Import ZArith List Bool Arith Lia.
From PyPM Require Import Syntax Subst Declarative.
Import ListNotations.

(** A condition on an operator: its attribute [fst c] is [snd c]. *)
Definition cls := (attribute * Z)%type.

Inductive rootset :=
| RAny                                       (** any operator *)
| RSyms (l : list symbol) (cs : list cls).   (** one of [l], or one meeting a condition of [cs] *)

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

(** The attributes of operator [f] in [G] (its class, …). *)
Definition sym_attrs (G : graph) (f : symbol) : attribute -> option Z := fun a => sym_attr G a f.

Definition cls_holds (sa : attribute -> option Z) (c : cls) : bool :=
  match sa (fst c) with Some v => Z.eqb v (snd c) | None => false end.

(** Whether operator [f], whose attributes are [sa], is in [r]. *)
Definition rs_mem (sa : attribute -> option Z) (f : symbol) (r : rootset) : bool :=
  match r with RAny => true | RSyms l cs => memb f l || existsb (cls_holds sa) cs end.

(** Whether [r] admits node [t] of [G] (its operator, with its attributes). *)
Definition admits (G : graph) (t : node) (r : rootset) : bool :=
  rs_mem (sym_attrs G (label G t)) (label G t) r.

Definition cls_eqb (c d : cls) : bool := Nat.eqb (fst c) (fst d) && Z.eqb (snd c) (snd d).

Definition cls_mem (c : cls) (cs : list cls) : bool := existsb (cls_eqb c) cs.

(** [c1] and the conditions of [c2] that are not in it. *)
Definition cunion (c1 c2 : list cls) : list cls :=
  c1 ++ filter (fun c => negb (cls_mem c c1)) c2.

Definition rs_union (a b : rootset) : rootset :=
  match a, b with
  | RSyms l1 c1, RSyms l2 c2 => RSyms (sunion l1 l2) (cunion c1 c2)
  | _, _ => RAny
  end.

(** [a ⊆ b] *)
Definition rs_le (a b : rootset) : bool :=
  match a, b with
  | _, RAny => true
  | RAny, RSyms _ _ => false
  | RSyms l1 c1, RSyms l2 c2 => subset l1 l2 && forallb (fun c => cls_mem c c2) c1
  end.

Lemma cls_mem_holds : forall sa c cs,
  cls_mem c cs = true -> cls_holds sa c = true -> existsb (cls_holds sa) cs = true.
Proof.
  intros sa c cs Hm Hc. unfold cls_mem in Hm. apply existsb_exists in Hm.
  destruct Hm as [d [Hd He]]. apply existsb_exists. exists d. split; [exact Hd|].
  destruct c as [a v], d as [b w]. unfold cls_eqb in He. simpl in He.
  apply andb_true_iff in He. destruct He as [E1 E2].
  apply Nat.eqb_eq in E1. apply Z.eqb_eq in E2. subst. exact Hc.
Qed.

Lemma rs_mem_union : forall sa f a b,
  rs_mem sa f a = true \/ rs_mem sa f b = true -> rs_mem sa f (rs_union a b) = true.
Proof.
  intros sa f [|l1 c1] [|l2 c2] H; simpl in *; auto.
  apply orb_true_iff. unfold cunion. rewrite existsb_app.
  destruct H as [H|H]; apply orb_true_iff in H; destruct H as [H|H].
  - left. apply memb_In. apply In_sunion. left. apply memb_In. exact H.
  - right. rewrite H. reflexivity.
  - left. apply memb_In. apply In_sunion. right. apply memb_In. exact H.
  - right. apply orb_true_iff. apply existsb_exists in H. destruct H as [c [Hc Hh]].
    destruct (cls_mem c c1) eqn:Em.
    + left. eapply cls_mem_holds; eauto.
    + right. apply existsb_exists. exists c. split; [|exact Hh].
      apply filter_In. rewrite Em. auto.
Qed.

Lemma rs_mem_le : forall sa f a b, rs_le a b = true -> rs_mem sa f a = true ->
  rs_mem sa f b = true.
Proof.
  intros sa f [|l1 c1] [|l2 c2] Hle H; simpl in *; auto; try discriminate.
  apply andb_true_iff in Hle. destruct Hle as [Hs Hc].
  apply orb_true_iff in H. apply orb_true_iff. destruct H as [H|H].
  - left. apply memb_In. apply memb_In in H. eapply subset_In; eauto.
  - right. apply existsb_exists in H. destruct H as [c [Hin Hh]].
    rewrite forallb_forall in Hc. eapply cls_mem_holds; [apply Hc; exact Hin | exact Hh].
Qed.

(** An index: definition number -> its rootset ([RAny] when absent). *)
Definition rindex := VarMap.t rootset.

Definition ri_find (R : rindex) (P : pname) : rootset :=
  match VarMap.find P R with Some r => r | None => RAny end.

(** The condition guard [g] puts on the operator [F] stands for: a
    conjunct [F.a = c] (or [c = F.a]), the first one. *)
Fixpoint guard_class (F : fvar) (g : guard) : option cls :=
  match g with
  | GEq (EFAttr F' a) (EConst c) | GEq (EConst c) (EFAttr F' a) =>
      if Nat.eqb F F' then Some (a, c) else None
  | GAnd g1 g2 =>
      match guard_class F g1 with Some c => Some c | None => guard_class F g2 end
  | _ => None
  end.

(** The operators the root of [p] can have, reading calls in [R]. *)
Fixpoint root_of (R : rindex) (p : pattern) : rootset :=
  match p with
  | PVar _ | PFunVar _ _ => RAny
  | PApp f _ => RSyms [f] []
  | PAlt p1 p2 => rs_union (root_of R p1) (root_of R p2)
  | PGuard p g =>
      match p with
      | PFunVar F _ =>
          match guard_class F g with Some c => RSyms [] [c] | None => RAny end
      | _ => root_of R p
      end
  | PExists _ p | PExistsF _ p | PConstr p _ _ => root_of R p
  | PCall P _ _ => ri_find R P
  end.

(** [acc] extended with [i + j ↦ f d_j] for the [j]-th definition [d_j]. *)
Fixpoint tabulate {A} (f : pdef -> A) (D : list pdef) (i : nat) (acc : VarMap.t A)
  : VarMap.t A :=
  match D with
  | [] => acc
  | d :: D' => tabulate f D' (S i) (VarMap.add i (f d) acc)
  end.

Lemma find_tabulate : forall A (f : pdef -> A) D i acc j,
  VarMap.find j (tabulate f D i acc) =
    if Nat.leb i j then
      match nth_error D (j - i) with
      | Some d => Some (f d)
      | None => VarMap.find j acc
      end
    else VarMap.find j acc.
Proof.
  intros A f D. induction D as [|d D IH]; intros i acc j; simpl.
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
  tabulate (fun _ => RSyms [] []) D 0 (VarMap.empty rootset).

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

  (** A guard's condition holds of the operator its variable stands for. *)
  Lemma guard_class_sound : forall σ ψ F g c f,
    eval_guard G σ ψ g = Some true -> guard_class F g = Some c -> ψ F = Some f ->
    sym_attr G (fst c) f = Some (snd c).
  Proof.
    intros σ ψ F g. induction g as [|e1 e2|e1 e2|g1 IH1 g2 IH2|g1 IH1 g2 IH2|g1 IH1];
      intros c f Hg Hc Hf; simpl in *; try discriminate.
    - destruct e1; destruct e2; try discriminate;
        destruct (Nat.eqb F _) eqn:E; try discriminate; inversion Hc; subst; clear Hc;
        apply Nat.eqb_eq in E; subst; simpl in *; rewrite Hf in Hg;
        unfold cmp_map2 in Hg; destruct (sym_attr G _ f) eqn:Ea; try discriminate;
        inversion Hg as [Hz]; apply Z.eqb_eq in Hz; subst; reflexivity.
    - unfold bool_map2 in Hg.
      destruct (eval_guard G σ ψ g1) as [[]|] eqn:E1; try discriminate;
        destruct (eval_guard G σ ψ g2) as [[]|] eqn:E2; try discriminate.
      destruct (guard_class F g1) eqn:Ec1.
      + inversion Hc; subst. eapply IH1; eauto.
      + eapply IH2; eauto.
  Qed.

  (** A match's root has an operator of [root_of R p], for a
      post-fixpoint [R]. *)
  Lemma root_of_sound : forall R, post_from D R 0 = true ->
    forall σ ψ p t, matches G D σ ψ p t -> admits G t (root_of R p) = true.
  Proof.
    intros R HR σ ψ p t H. unfold admits.
    induction H using matches_mut with
      (P0 := fun _ _ _ _ _ => True); simpl; auto.
    - rewrite e. simpl. rewrite Nat.eqb_refl. reflexivity.
    - apply rs_mem_union. auto.
    - apply rs_mem_union. auto.
    - destruct p; auto.
      match goal with Hm : matches _ _ _ _ (PFunVar _ _) _ |- _ => inversion Hm; subst end.
      destruct (guard_class F g) as [c|] eqn:Ec; [|reflexivity].
      simpl. unfold cls_holds, sym_attrs.
      match goal with Hf : ψ F = Some (label G t) |- _ =>
        rewrite (guard_class_sound σ ψ F g c (label G t) e Ec Hf), Z.eqb_refl end.
      reflexivity.
    - eapply rs_mem_le; [|exact IHmatches].
      apply (post_from_nth D R 0 P d HR e).
  Qed.

  (** The index is sound: a definition whose index does not allow the
      node has no match there, whatever the substitutions. *)
  Theorem root_index_sound : forall P d σ ψ t,
    nth_error D P = Some d -> matches G D σ ψ (body d) t ->
    admits G t (ri_find (root_index D) P) = true.
  Proof.
    intros P d σ ψ t Hd Hm. unfold admits.
    eapply rs_mem_le; [|eapply root_of_sound; [apply root_index_post | exact Hm]].
    apply (post_from_nth D _ 0 P d (root_index_post D) Hd).
  Qed.

  Corollary root_index_no_match : forall P d σ ψ t,
    nth_error D P = Some d ->
    admits G t (ri_find (root_index D) P) = false ->
    ~ matches G D σ ψ (body d) t.
  Proof.
    intros P d σ ψ t Hd Hno Hm. rewrite (root_index_sound P d σ ψ t Hd Hm) in Hno.
    discriminate.
  Qed.
End Sound.
