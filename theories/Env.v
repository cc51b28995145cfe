(** * Scopes: environments from a pattern's variables to machine slots

    The state machine keeps one global substitution over *slots* (numbers
    allocated by the machine). Every pending action carries an environment
    [ρ] saying which slot each of its pattern's variables stands for. A
    pattern call gets a new environment in which parameter [i] is the slot
    of the caller's [i]-th argument (ST-MATCH-MU's [p[y_i/x_i]]), and
    [∃x.p] maps [x] to a fresh slot (so local variables are new at every
    unfolding of a recursive pattern). [gsub Θ ρ] is the substitution the
    declarative semantics sees: [x ↦ Θ(ρ(x))]. *)

From Coq Require Import List Arith Bool Lia.
From PyPM Require Import Syntax Subst Declarative.
Import ListNotations.

Definition vmap := VarMap.t nat.

Record env := mkEnv { tenv : vmap; fenv : vmap }.

Definition vfind (x : nat) (m : vmap) : option nat := VarMap.find x m.

(** [x ↦ Θ(ρ(x))] *)
Definition gsub (Θ : subst) (m : vmap) : nat -> option nat :=
  fun x => match vfind x m with Some g => lookup g Θ | None => None end.

Definition env_add_t (ρ : env) (x s : nat) : env :=
  mkEnv (VarMap.add x s (tenv ρ)) (fenv ρ).
Definition env_add_f (ρ : env) (F s : nat) : env :=
  mkEnv (tenv ρ) (VarMap.add F s (fenv ρ)).

(** Parameter [i] of the callee is the slot of the caller's [i]-th argument. *)
Fixpoint call_map (m : vmap) (xs : list nat) (i : nat) : vmap :=
  match xs with
  | [] => VarMap.empty nat
  | x :: xs' =>
      let m' := call_map m xs' (S i) in
      match vfind x m with
      | Some g => VarMap.add i g m'
      | None => m'
      end
  end.

Definition call_env (ρ : env) (xs Fs : list nat) : env :=
  mkEnv (call_map (tenv ρ) xs 0) (call_map (fenv ρ) Fs 0).

(** The top-level scope: variable [i < n] is slot [i]. *)
Fixpoint ident_map (n : nat) : vmap :=
  match n with
  | O => VarMap.empty nat
  | S n' => VarMap.add n' n' (ident_map n')
  end.

Lemma vfind_empty : forall x, vfind x (VarMap.empty nat) = None.
Proof. intros. unfold vfind. apply VarMapF.empty_o. Qed.

Lemma vfind_add : forall x y s m,
  vfind y (VarMap.add x s m) = if Nat.eqb x y then Some s else vfind y m.
Proof.
  intros. unfold vfind. destruct (Nat.eqb x y) eqn:E.
  - apply Nat.eqb_eq in E. subst. apply VarMapF.add_eq_o. reflexivity.
  - apply Nat.eqb_neq in E. apply VarMapF.add_neq_o. exact E.
Qed.

Lemma vfind_call_map : forall m xs i j,
  vfind j (call_map m xs i) =
    if Nat.ltb j i then None
    else match nth_error xs (j - i) with Some x => vfind x m | None => None end.
Proof.
  intros m xs. induction xs as [|x xs IH]; intros i j; simpl.
  - rewrite vfind_empty. destruct (Nat.ltb j i); auto.
    destruct (j - i); reflexivity.
  - destruct (vfind x m) eqn:Hx.
    + rewrite vfind_add. destruct (Nat.eqb i j) eqn:E.
      * apply Nat.eqb_eq in E. subst. rewrite Nat.ltb_irrefl, Nat.sub_diag. simpl.
        congruence.
      * apply Nat.eqb_neq in E. rewrite IH.
        destruct (Nat.ltb j i) eqn:L1; destruct (Nat.ltb j (S i)) eqn:L2;
          rewrite ?Nat.ltb_lt, ?Nat.ltb_ge in *; try lia; auto.
        replace (j - i) with (S (j - S i)) by lia. reflexivity.
    + rewrite IH. destruct (Nat.ltb j i) eqn:L1; destruct (Nat.ltb j (S i)) eqn:L2;
        rewrite ?Nat.ltb_lt, ?Nat.ltb_ge in *; try lia; auto.
      * assert (j = i) by lia. subst. rewrite Nat.sub_diag. simpl. congruence.
      * replace (j - i) with (S (j - S i)) by lia. reflexivity.
Qed.

Lemma gsub_call_map : forall Θ m xs x,
  gsub Θ (call_map m xs 0) x = call_sub (gsub Θ m) xs x.
Proof.
  intros. unfold gsub, call_sub. rewrite vfind_call_map. simpl.
  rewrite Nat.sub_0_r. destruct (nth_error xs x); reflexivity.
Qed.

Lemma vfind_call_map_in : forall m xs x g,
  vfind x (call_map m xs 0) = Some g -> exists y, vfind y m = Some g.
Proof.
  intros m xs x g H. rewrite vfind_call_map in H. simpl in H.
  destruct (nth_error xs (x - 0)); [eauto | discriminate].
Qed.

Lemma vfind_ident_map : forall n x,
  vfind x (ident_map n) = if Nat.ltb x n then Some x else None.
Proof.
  induction n as [|n IH]; intros x; simpl.
  - apply vfind_empty.
  - rewrite vfind_add, IH. destruct (Nat.eqb n x) eqn:E.
    + apply Nat.eqb_eq in E. subst. rewrite (proj2 (Nat.ltb_lt x (S x))) by lia.
      reflexivity.
    + apply Nat.eqb_neq in E.
      destruct (Nat.ltb x n) eqn:L1; destruct (Nat.ltb x (S n)) eqn:L2;
        rewrite ?Nat.ltb_lt, ?Nat.ltb_ge in *; auto; lia.
Qed.

(** ** Freshness: every slot a structure mentions is below [nf] *)

Definition map_below (nf : nat) (m : vmap) : Prop :=
  forall x g, vfind x m = Some g -> g < nf.

Definition env_below (nf : nat) (ρ : env) : Prop :=
  map_below nf (tenv ρ) /\ map_below nf (fenv ρ).

Definition dom_below (nf : nat) (Θ : subst) : Prop :=
  forall g v, lookup g Θ = Some v -> g < nf.

(** Two substitutions agreeing below [nf] look the same through any
    environment below [nf]. *)
Lemma gsub_agree : forall nf Θ1 Θ2 m,
  (forall g, g < nf -> lookup g Θ1 = lookup g Θ2) -> map_below nf m ->
  forall x, gsub Θ1 m x = gsub Θ2 m x.
Proof.
  intros nf Θ1 Θ2 m Ha Hm x. unfold gsub.
  destruct (vfind x m) eqn:E; auto. apply Ha. eapply Hm. eauto.
Qed.
